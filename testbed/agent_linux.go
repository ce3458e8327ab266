package testbed

import (
	"context"
	"errors"

	"github.com/netprober/prober/lab"
)

// StartAgent writes s.Config and starts `prober agent` with it in the
// namespace of s.Host. It does not wait for the agent to serve: start
// several, then WaitHealthy on each.
func StartAgent(ctx context.Context, f *lab.Fabric, s AgentSpec) (*Agent, error) {
	if s.Config == nil {
		return nil, errors.New("testbed: AgentSpec without a Config")
	}
	name := s.Config.Name
	host := s.Host
	if host == "" {
		host = name
	}
	ns, err := f.Namespace(host)
	if err != nil {
		return nil, err
	}
	path, err := WriteConfig(s.Dir, name, s.Config)
	if err != nil {
		return nil, err
	}
	bin, args := s.Prober.Path, []string{"agent", "--config", path}
	if s.Prober.Agent != "" {
		bin, args = s.Prober.Agent, args[1:]
	}
	p, err := StartProcess(ctx, f, ProcessSpec{
		Host: host, Name: "agent-" + name, Path: bin, Args: args,
		Env: s.Prober.Env, Dir: s.Dir,
	})
	if err != nil {
		return nil, err
	}
	client, url := agentClient(ns, s.Config)
	return &Agent{Process: p, name: name, url: url, client: client}, nil
}
