package matrix_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/netprober/prober/matrix/matrixsim"
)

func TestDebugOne(t *testing.T) {
	fab, _ := matrixsim.New(evalFabric)
	for _, ft := range []matrixsim.Fault{
		{Kind: matrixsim.LinkLoss, Loss: 0.01, Rack: 3, Spine: 2, Up: false},
		{Kind: matrixsim.SpineLoss, Loss: 0.02, Spine: 1},
		{Kind: matrixsim.HostNIC, Loss: 0.02, Rack: 5, Node: 3},
		{Kind: matrixsim.Blackhole, Loss: 1, Spine: 1},
	} {
		d := localize(t, fab, ft, 42)
		t.Log(fab.Truth(ft))
		for i := range d.Suspects {
			d.Suspects[i].Evidence.Examples = d.Suspects[i].Evidence.Examples[:min(1, len(d.Suspects[i].Evidence.Examples))]
			if len(d.Suspects[i].Evidence.Links) > 3 {
				d.Suspects[i].Evidence.Links = d.Suspects[i].Evidence.Links[:3]
			}
			d.Suspects[i].Addresses = nil
		}
		e := json.NewEncoder(os.Stdout)
		e.SetIndent("", " ")
		e.Encode(d.Suspects)
	}
}
