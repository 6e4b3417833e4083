package translate

// gateways is the Gateway API front end: the tenant's Gateway Routes and the routes attached
// to them (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute). See docs/l7.md.
func (t *l7) gateways() {}
