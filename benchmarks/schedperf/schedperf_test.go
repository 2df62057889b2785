// Package schedperf runs upstream's scheduler benchmark (k8s.io/kubernetes/test/integration/scheduler_perf)
// on a performance-config.yaml that benchmarks/kinds/scheduler_perf.py writes into the working directory:
// upstream's test cases, with the scheduler configuration and pod templates of one arm.
//
// The harness starts kube-apiserver and kube-scheduler in this process. An extender outside it (the
// project's, which watches the cluster) needs to reach that API server, and it needs its resources
// (the PlacementPolicy definition and the policy) before the first pod is created. So before each
// workload runs, a hook writes the harness's client configuration as a kubeconfig to
// $SCHEDPERF_KUBECONFIG and waits until the runner creates $SCHEDPERF_READY (it has applied what the
// arm needs and the extender answers). When the workload is done, before the API server shuts down, it
// creates $SCHEDPERF_DONE and waits until the runner removes it: the runner stops the extender (or the
// Go floor) then. Otherwise the extender's open watches hold the API server's graceful shutdown for
// minutes, and kube-scheduler's idle connections to either hold upstream's goroutine leak check for
// the 90 s of Go's idle connection timeout. Without those variables the hook does nothing and the
// binary is upstream's benchmark as is.
package schedperf

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	_ "k8s.io/component-base/logs/json/register"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	m.Run()
}

// handOver writes the kubeconfig and waits for the runner's go-ahead.
func handOver(tCtx ktesting.TContext) error {
	if done := os.Getenv("SCHEDPERF_DONE"); done != "" {
		// Cleanups run last registered first: this one before the API server's teardown, registered earlier.
		tCtx.Cleanup(func() { handBack(tCtx, done) })
	}
	path, ready := os.Getenv("SCHEDPERF_KUBECONFIG"), os.Getenv("SCHEDPERF_READY")
	if path == "" || ready == "" {
		return nil
	}
	rest := tCtx.RESTConfig()
	config := clientcmdapi.NewConfig()
	// The API server's serving certificate is a throw-away one made for this process; the
	// connection stays on the loopback interface, so the runner's clients skip its check.
	config.Clusters["harness"] = &clientcmdapi.Cluster{Server: rest.Host, InsecureSkipTLSVerify: true}
	config.AuthInfos["harness"] = &clientcmdapi.AuthInfo{Token: rest.BearerToken}
	config.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: "harness"}
	config.CurrentContext = "harness"
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ready); err == nil {
			return os.Remove(ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no %s within 10 minutes: the runner did not prepare the arm", ready)
}

// handBack tells the runner the workload is done and waits (a minute at most) until it has stopped the
// extender.
func handBack(tCtx ktesting.TContext, done string) {
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		tCtx.Logf("cannot write %s: %v", done, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(done); os.IsNotExist(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tCtx.Logf("the runner did not answer %s within a minute", done)
}

func TestSchedulerPerf(t *testing.T) {
	perf.RunIntegrationPerfScheduling(t, "performance-config.yaml", perf.WithPrepareFn(handOver))
}

func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "performance-config.yaml", "placement", nil, perf.WithPrepareFn(handOver))
}
