package peers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netprober/prober/peers"
)

// TestDialMatrix is kubectl prober's way to the matrix against the real
// kube-apiserver, which runs no kubelet: no matrix pod, one not Ready and
// an unknown context each get a message saying what to check, and a
// Ready one is chosen and dialled through its portforward subresource,
// which fails here naming it (TestCluster forwards for real).
func TestDialMatrix(t *testing.T) {
	s := apiServer(t)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const ns = "plugin-test"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller makes the namespace's default ServiceAccount here.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := s.Kubeconfig("plugin", "")
	if err != nil {
		t.Fatal(err)
	}
	dial := func(o peers.KubeconfigOptions) error {
		t.Helper()
		c, err := peers.DialMatrix(ctx, o, "test", "127.0.0.1", 0)
		if err == nil {
			c.Close()
		}
		return err
	}
	o := peers.KubeconfigOptions{Path: kubeconfig, Namespace: ns}
	if err := dial(o); err == nil || !strings.Contains(err.Error(), "no Ready matrix pod in namespace plugin-test (0 found") {
		t.Errorf("no matrix pod: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prober-matrix-1", Labels: map[string]string{"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": "matrix"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "matrix", Image: "prober.local/prober:test",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9809}}}}},
	}
	if pod, err = admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dial(o); err == nil || !strings.Contains(err.Error(), "(1 found") {
		t.Errorf("a matrix pod not Ready: %v", err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := admin.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dial(o); err == nil || !strings.Contains(err.Error(), "port-forward to plugin-test/prober-matrix-1") {
		t.Errorf("a Ready matrix pod on no node: %v, want the forward to it refused", err)
	}
	o.Context = "nowhere"
	if err := dial(o); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("an unknown context: %v", err)
	}
}
