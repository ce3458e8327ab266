// Package testbed runs prober end to end for tests and demos: its agents
// and matrix on the lab fabric, as processes in the fabric's network
// namespaces (package lab), beside the tools that watch them, such as a
// real Prometheus. `prober lab demo`, the scenario suite, the dashboards'
// live test and the HTTP/2 lab tests all run through it, so a harness is
// written once.
//
// The pieces, smallest first:
//
//   - StartProcess runs a program in a lab namespace, its output in a log
//     file, and stops it by the pid it started; Usage reads its resident
//     memory and CPU time from /proc (TestAgentFootprint, issue 14).
//   - AddHostAddrs gives a lab node more addresses, so that one program
//     there answers as many peers.
//   - AgentConfig renders a lab host's agent configuration; StartAgent
//     runs `prober agent` with one in the host's namespace and talks to
//     its endpoints from there (health, observations, metrics).
//   - StartFabric builds a fabric with a node-class agent on every node,
//     a pod-class agent in every pod (like the two DaemonSets) and the
//     matrix in this process; WaitFor watches its diagnosis.
//     WaitFilled waits until its windows hold nothing of the start-up.
//   - StartPrometheus runs Debian's prometheus in a lab namespace, and
//     PromClient queries it; StartCoreDNS runs CoreDNS there, a DNS
//     server for the DNS probes to ask.
//   - StartCluster, the biggest: a real Kubernetes cluster on the fabric
//     (containerd, kubelet and kube-proxy on every node, the control
//     plane behind the LB's VIP, images built from this checkout), on
//     which deploy/ runs as a user would apply it; TestCluster drives it
//     through the incident seeds.
//
// What to start is said by exported spec types (FabricSpec, AgentSpec,
// ProcessSpec, PrometheusSpec, CoreDNSSpec, ClusterSpec); what runs
// (Fabric, Agent, Process, Prometheus, CoreDNS, Cluster) keeps its state unexported behind methods. Every Start
// function removes what it started when it fails, and every running thing
// has a Close that stops it, by the pid it was started with, and removes
// its files. Starting needs Linux and root (see
// lab.NeedNetAdmin); elsewhere the Start functions return
// errors.ErrUnsupported.
package testbed
