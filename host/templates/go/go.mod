module example.com/__NAME__

// The SDK's runtime package (go.bytecodealliance.org/pkg v0.4.0) asks for
// Go 1.27.1; an older go fetches that toolchain itself (GOTOOLCHAIN=auto).
go 1.27.1

require open-control-plane.io/service-provider-host/sdk-go v0.2.0
