// Package serviceprovider is the Go SDK for service-provider plugins: the
// plugin contract (wit/v0.2.0, world `plugin`) as plain Go types, and
// [Export], which makes a [Provider] the component's implementation.
//
// A plugin is a `main` package that calls Export from an init function:
//
//	func init() { sp.Export(hello{}) }
//	func main() {}
//
// and is built with Go 1.27.1 or newer for GOOS=wasip1 GOARCH=wasm with
// -buildmode=c-shared, then made a component by
// `service-provider-host plugin componentize` (the build.sh that
// `service-provider-host plugin new --lang go` writes does both). The host
// starts the Go runtime on every call (a fresh instance per call): nothing
// survives from one call to the next, so a plugin keeps no state.
//
// Plugin logic is ordinary Go: test it natively with `go test`, and share
// named cases with the host through package sptest. The author's guide is
// docs/plugin-guide.md in https://github.com/openmcp-project/service-provider-host.
package serviceprovider

// ContractVersion is the contract version these types and the bindings
// implement.
const ContractVersion = "0.2.0"
