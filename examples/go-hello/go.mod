module open-control-plane.io/service-provider-host/examples/go-hello

go 1.27.1
