module open-control-plane.io/service-provider-host/sdk-go

// The runtime package the generated bindings import asks for Go 1.27.1,
// and so every module that builds them does; an older go fetches that
// toolchain itself (GOTOOLCHAIN=auto).
go 1.27.1

// The runtime package of the generated bindings, as wit-bindgen-go 0.63
// releases it. Authors get it from their module proxy; this repository's
// builds, whose CI reaches a proxy that does not serve it, have
// `plugin-build go-runtime` write it from the wit-bindgen-go crate cargo
// fetched and use it through the go.work scripts/go-plugin.sh writes.
require go.bytecodealliance.org/pkg v0.4.0
