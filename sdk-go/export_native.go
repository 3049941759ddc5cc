//go:build !wasip1

package serviceprovider

// Export makes p the component's implementation. Natively (`go test`) there
// is no component: it only checks that p is a Provider.
func Export(p Provider) { _ = p }
