module open-control-plane.io/service-provider-host/examples/go-kro

go 1.27.1
