package process

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// Scheme knows the core kinds, kubelb's kinds, the Gateway API kinds and CRDs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, kubelbv1alpha1.AddToScheme, gwapiv1.Install, gwapiv1beta1.Install, apiextensionsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // only on programming errors: the kinds are known at build time
		}
	}
	return s
}
