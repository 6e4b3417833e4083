package framework

import (
	"path/filepath"
	"strings"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ControllerManagerControllers are the kube-controller-manager controllers the conformance
// harness runs in the tenant cluster: Deployments become ReplicaSets and Pods, Services get
// EndpointSlices, namespaces and owned objects are cleaned up, and every namespace gets its
// default ServiceAccount.
var ControllerManagerControllers = []string{
	"deployment-controller", "replicaset-controller", "endpointslice-controller",
	"namespace-controller", "garbage-collector-controller", "serviceaccount-controller",
}

// StartControllerManager starts the real kube-controller-manager (built by `make tools`
// beside kube-apiserver) against a cluster, with ControllerManagerControllers only and no
// serving port. It stops when the test ends.
func StartControllerManager(t testenv.TB, cluster *testenv.Cluster) *testsupport.Process {
	t.Helper()
	return StartControllerManagerWith(t, cluster, ControllerManagerControllers...)
}

// StartControllerManagerWith is StartControllerManager with the given controllers only (e.g.
// "resourcequota-controller", which computes the usage ResourceQuotas are enforced with).
func StartControllerManagerWith(t testenv.TB, cluster *testenv.Cluster, controllers ...string) *testsupport.Process {
	t.Helper()
	bin := filepath.Join(testenv.AssetsDir(t), "kube-controller-manager")
	return testsupport.StartProcess(t, "kube-controller-manager-"+cluster.Name, bin,
		"--kubeconfig", cluster.Kubeconfig, "--controllers", strings.Join(controllers, ","),
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--concurrent-service-endpoint-syncs=10",
		"--v=1")
}
