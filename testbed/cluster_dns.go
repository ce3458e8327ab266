package testbed

import (
	"fmt"
	"net/netip"
)

// The cluster's DNS: CoreDNS (hack/kube/build.sh builds it into KubeDir)
// as kubeadm's addon runs it, a Deployment of two behind the Service
// kube-system/kube-dns, with the kubernetes plugin answering the
// cluster's names from the API and nothing forwarded anywhere: pods never
// send a lookup out of the lab. The kubelets hand its ClusterIP to every
// pod (clusterDNS).
const (
	CoreDNSImage    = "prober.local/coredns:dev"
	DNSNamespace    = "kube-system"
	DNSService      = "kube-dns"
	coreDNSReplicas = 2
)

var (
	// DNSServiceIP is the DNS Service's ClusterIP, the kubelets'
	// clusterDNS; DNSServiceIP6 its IPv6 one on a dual-stack cluster.
	DNSServiceIP  = netip.MustParseAddr("198.19.200.10")
	DNSServiceIP6 = netip.MustParseAddr("2001:2:0:200::a")
)

// coreDNSManifest is the DNS's objects, dual-stack or IPv4 only.
func coreDNSManifest(dualStack bool) string {
	clusterIPs, policy := fmt.Sprintf("[%s]", DNSServiceIP), "SingleStack"
	if dualStack {
		clusterIPs, policy = fmt.Sprintf("[%s, %q]", DNSServiceIP, DNSServiceIP6), "RequireDualStack"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: %d
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      # One a node, as kubeadm's addon spreads them: an endpoint's node
      # is its own.
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {k8s-app: kube-dns}}}
      containers:
        - name: coredns
          image: %s
          imagePullPolicy: Never
          args: [-conf, /etc/coredns/Corefile]
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
          volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
          # kubeadm's addon's: at 20m its CPU weight was the node's
          # lowest, under half a prober agent's (50m).
          resources: {limits: {memory: 170Mi}, requests: {cpu: 100m, memory: 70Mi}}
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: %s
  clusterIPs: %s
  ipFamilyPolicy: %s
  ports:
    - {name: dns, port: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, protocol: TCP}
`, coreDNSReplicas, CoreDNSImage, DNSServiceIP, clusterIPs, policy)
}
