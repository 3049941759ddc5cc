module open-control-plane.io/service-provider-host/sdk-go

go 1.24

// The runtime package the generated bindings import. Its release is not on
// the Go module proxy: `task go-runtime` writes it from the wit-bindgen-go
// crate into target/go/runtime, and the go.work that `task
// build-go-plugin` writes uses it from there.
require go.bytecodealliance.org/pkg v0.4.0
