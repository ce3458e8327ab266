package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// MatrixClient reads a running `prober matrix` over HTTP, as its page
// does: the loss matrix and the diagnosis.
type MatrixClient struct {
	// Base is the matrix's URL, such as http://198.19.200.17:9809.
	Base   string
	Client *http.Client
}

// MatrixView is api.MatrixPath's answer: the snapshot and the pulls
// behind it.
type MatrixView = api.MatrixView

// Matrix fetches the loss matrix.
func (m MatrixClient) Matrix(ctx context.Context) (MatrixView, error) {
	var v MatrixView
	return v, m.get(ctx, api.MatrixPath, &v)
}

// Diagnosis fetches the diagnosis.
func (m MatrixClient) Diagnosis(ctx context.Context) (matrix.Diagnosis, error) {
	var d matrix.Diagnosis
	return d, m.get(ctx, api.DiagnosisPath, &d)
}

// Plan is the matrix's /api/v1/plan: every agent's plan, or with node
// set that node's agents and who probes them.
func (m MatrixClient) Plan(ctx context.Context, node string) (api.PlanView, error) {
	var v api.PlanView
	path := api.PlanPath
	if node != "" {
		path += "?node=" + url.QueryEscape(node)
	}
	return v, m.get(ctx, path, &v)
}

func (m MatrixClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Base+path, nil)
	if err != nil {
		return err
	}
	resp, err := m.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s%s: %s: %s", m.Base, path, resp.Status, b)
	}
	// A matrix of thousands of nodes is megabytes, never more.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s%s: %w", m.Base, path, err)
	}
	return nil
}

// WaitFor polls the matrix every second until cond holds or within
// passes, drawing progress on out (tty: redrawn in place). Failed reads
// are retried until within: a matrix pod that restarts comes back.
func (m MatrixClient) WaitFor(ctx context.Context, out io.Writer, tty bool, within time.Duration, what string, cond func(matrix.Diagnosis, matrix.Snapshot) bool) (time.Duration, error) {
	read := func(ctx context.Context) (matrix.Diagnosis, matrix.Snapshot, error) {
		v, err := m.Matrix(ctx)
		if err != nil {
			return matrix.Diagnosis{}, matrix.Snapshot{}, err
		}
		d, err := m.Diagnosis(ctx)
		return d, v.Snapshot, err
	}
	return waitMatrix(ctx, out, tty, within, what, read, cond)
}
