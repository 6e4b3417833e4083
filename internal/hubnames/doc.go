// Package hubnames owns how kubelb names and marks the objects it makes on the hub, and how it
// tells whose an object is: a tenant's name and its hub namespace ("x" ↔ "tenant-x"), the
// names of hub Services, the labels kubelb sets on hub objects, and the checks that decide
// whether an object is one kubelb made (and for which LoadBalancer or Route). Both binaries
// use it: the ccm to name and label what it mirrors into its tenant namespace, the manager to
// name, label and recognise what it makes there. It is pure (no client) and imports nothing
// of kubelb's but the API types.
package hubnames
