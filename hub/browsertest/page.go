package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// pollInterval is how often a wait evaluates its condition. Waits poll
// from Go with Runtime.evaluate rather than inside the page (chromedp's
// Poll compiles the condition with new Function, which the matrix page's
// Content-Security-Policy forbids), and survive a navigation.
const pollInterval = 25 * time.Millisecond

// Navigate loads url and waits for its load event; a response of 400 or
// more fails the test.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		b.fatalf("navigate to %s: %v", url, err)
	}
	if resp != nil && resp.Status >= http.StatusBadRequest {
		b.fatalf("navigate to %s: %d %s", url, resp.Status, resp.StatusText)
	}
}

// InitScript runs js in every document the tab loads from now on, before
// the page's own scripts (and outside its Content-Security-Policy): to
// record when something happens, or to stub an API.
func (b *Browser) InitScript(js string) {
	b.t.Helper()
	b.Run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: js})
		return err
	}))
}

// WaitVisible waits until the first element matching the CSS selector is
// rendered with a size.
func (b *Browser) WaitVisible(selector string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(selector))); err != nil {
		b.fatalf("wait %v for %s to be visible: %v", timeout, selector, err)
	}
}

// WaitUntil waits until the JavaScript expression is truthy, such as
// `document.body.dataset.ready == "1"`; a promise is awaited.
func (b *Browser) WaitUntil(expr string, timeout time.Duration) {
	b.t.Helper()
	if _, err := b.poll(expr, timeout); err != nil {
		b.fatalf("wait %v until %s: %v", timeout, expr, err)
	}
}

// Eventually reports whether the JavaScript expression became truthy
// within timeout, without failing the test when it did not.
func (b *Browser) Eventually(expr string, timeout time.Duration) bool {
	b.t.Helper()
	_, err := b.poll(expr, timeout)
	if err != nil && b.ctx.Err() != nil {
		b.fatalf("wait until %s: %v", expr, err)
	}
	return err == nil
}

// Eval evaluates the JavaScript expression, awaiting a promise, and
// decodes its value (as JSON) into out; out may be nil. An exception
// fails the test.
func (b *Browser) Eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("eval %s: %v", expr, err)
	}
	if out == nil {
		return
	}
	if raw == nil {
		raw = []byte("null") // undefined
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.fatalf("eval %s: decode %.200s into %T: %v", expr, raw, out, err)
	}
}

// Click clicks the middle of the first element matching the CSS
// selector, waiting until it is visible.
func (b *Browser) Click(selector string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(selector))); err != nil {
		b.fatalf("click %s: %v", selector, err)
	}
}

// Text is the text of the first element matching the CSS selector, as
// rendered (innerText; textContent for SVG), waiting until one exists.
func (b *Browser) Text(selector string) string {
	b.t.Helper()
	sel, _ := json.Marshal(selector)
	raw, err := b.poll(fmt.Sprintf(`(e => e && {text: e.innerText ?? e.textContent})(document.querySelector(%s))`, sel), b.opts.Timeout)
	if err != nil {
		b.fatalf("text of %s: %v", selector, err)
	}
	var v struct{ Text string }
	if err := json.Unmarshal(raw, &v); err != nil {
		b.fatalf("text of %s: %v", selector, err)
	}
	return v.Text
}

// Screenshot is a PNG of the whole page, beyond the window.
func (b *Browser) Screenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fatalf("screenshot: %v", err)
	}
	return png
}

// Run runs chromedp actions in the tab, bounded by Options.Timeout, for
// what the methods above do not cover.
func (b *Browser) Run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatalf("run: %v", err)
	}
}

// Context is the tab's context, for chromedp.Run with actions that return
// a value. It lives as long as the browser: bound each call.
func (b *Browser) Context() context.Context { return b.ctx }

// poll evaluates expr every pollInterval until it is truthy and returns
// its value as JSON. An error (a page between documents, a syntax error)
// is retried until the timeout, then reported.
func (b *Browser) poll(expr string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	// The newline ends a trailing // comment in expr.
	js := "(async () => { const v = await (" + expr + "\n); return v ? v : null })()"
	var last error
	for {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
		if err == nil && raw != nil && string(raw) != "null" {
			return raw, nil
		}
		if err != nil && ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if b.ctx.Err() != nil {
				return nil, fmt.Errorf("the browser is gone: %w", context.Cause(b.ctx))
			}
			if last != nil {
				return nil, fmt.Errorf("not true after %v; last error: %w", timeout, last)
			}
			return nil, fmt.Errorf("not true after %v", timeout)
		case <-time.After(pollInterval):
		}
	}
}

// fatalf fails the test with the page's errors so far appended: a
// failure in a browser test is often explained by them.
func (b *Browser) fatalf(format string, args ...any) {
	b.t.Helper()
	msg := "browsertest: " + fmt.Sprintf(format, args...)
	if errs := b.Errors(); len(errs) > 0 {
		var sb strings.Builder
		for _, m := range errs {
			sb.WriteString("\n\t" + m.String())
		}
		msg += "\npage errors:" + sb.String()
	}
	b.t.Fatal(msg)
}
