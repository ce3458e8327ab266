package browsertest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
)

// Message is one entry of the page's console: a console.* call, an
// uncaught exception or unhandled rejection, or an entry of the browser's
// log (a failed load, a Content-Security-Policy violation).
type Message struct {
	// Level is "error", "warning", "info", "log", "debug" or another
	// console call's type; an uncaught exception and a failed
	// console.assert are "error".
	Level string
	// Source is "console" for a console.* call, "exception" for an
	// uncaught exception, else the browser log's source ("network",
	// "security", "javascript"...).
	Source string
	Text   string
	// URL and Line (1-based; 0 unknown) say where, when known.
	URL  string
	Line int64
}

// String is the message as one line: level, source, text and place.
func (m Message) String() string {
	s := m.Level + " " + m.Source + ": " + m.Text
	if m.URL != "" {
		s += fmt.Sprintf(" (%s:%d)", m.URL, m.Line)
	}
	return s
}

// Console is every message the page logged so far, in order.
func (b *Browser) Console() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.console...)
}

// Errors are the page's messages of level error so far, in order.
func (b *Browser) Errors() []Message {
	var errs []Message
	for _, m := range b.Console() {
		if m.Level == "error" {
			errs = append(errs, m)
		}
	}
	return errs
}

// NoErrors fails the test, without stopping it, when the page logged an
// error, an uncaught exception or a failed load.
func (b *Browser) NoErrors() {
	b.t.Helper()
	for _, m := range b.Errors() {
		b.t.Errorf("browsertest: the page logged %s", m)
	}
}

// listen is the tab's event listener. It runs on chromedp's reading
// goroutine from the tab's first message on, so it only records.
func (b *Browser) listen(ev any) {
	var m Message
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		m = Message{Level: string(e.Type), Source: "console", Text: argsText(e.Args)}
		switch e.Type {
		case runtime.ConsoleAPICalledTypeWarning:
			m.Level = "warning"
		case runtime.ConsoleAPICalledTypeAssert:
			m.Level = "error"
		}
		if st := e.StackTrace; st != nil && len(st.CallFrames) > 0 {
			m.URL, m.Line = st.CallFrames[0].URL, st.CallFrames[0].LineNumber+1
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		m = Message{Level: "error", Source: "exception", Text: d.Text, URL: d.URL, Line: d.LineNumber + 1}
		if d.Exception != nil {
			// The description holds the stack after the first line.
			desc, _, _ := strings.Cut(valueText(d.Exception), "\n")
			m.Text = strings.TrimSpace(d.Text + " " + desc)
		}
		if m.URL == "" && d.StackTrace != nil && len(d.StackTrace.CallFrames) > 0 {
			m.URL, m.Line = d.StackTrace.CallFrames[0].URL, d.StackTrace.CallFrames[0].LineNumber+1
		}
	case *log.EventEntryAdded:
		en := e.Entry
		if en.Source == log.EntrySourceNetwork && strings.HasSuffix(en.URL, "/favicon.ico") {
			// The browser's own request, not the page's: a page
			// without an icon is not broken.
			return
		}
		m = Message{Level: string(en.Level), Source: string(en.Source), Text: en.Text, URL: en.URL}
		if en.LineNumber > 0 {
			m.Line = en.LineNumber + 1
		}
	default:
		return
	}
	b.mu.Lock()
	b.console = append(b.console, m)
	b.mu.Unlock()
}

// argsText joins a console call's arguments as the console shows them,
// roughly: strings as they are, other values by description.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		parts = append(parts, valueText(a))
	}
	return strings.Join(parts, " ")
}

func valueText(o *runtime.RemoteObject) string {
	switch {
	case o.Type == runtime.RemoteObjectTypeString && len(o.Value) > 0:
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
		return string(o.Value)
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	}
	return string(o.Type)
}
