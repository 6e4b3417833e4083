package translate

// ingresses is the Ingress front end: the tenant's Ingress Routes on the shared Ingress
// listeners (ports 80 and 443 of the kubelb-ingress hub Service). See docs/l7.md.
func (t *l7) ingresses() {}
