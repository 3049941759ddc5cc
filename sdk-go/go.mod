module open-control-plane.io/service-provider-host/sdk-go

go 1.24

// The runtime package the generated bindings import. Its release is not on
// the Go module proxy: scripts/go-plugin.sh (`task build-go-plugin`) has
// `plugin-build go-runtime` write it from the wit-bindgen-go crate into
// target/go/runtime, and uses it from there through the go.work it writes.
require go.bytecodealliance.org/pkg v0.4.0
