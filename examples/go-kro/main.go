// Command go-kro is guest-kro ported to Go: the Kro service provider as a
// plugin for the service-provider host. It gives the same answers as the
// Rust original on the shared cases (testdata/cases.json, written from
// guest-kro's), which `go test` and the host's tests check; the host's
// Kro lifecycle test runs it on real API servers.
package main

import (
	"errors"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

type kro struct{}

// kroError is what went wrong while planning, and whether only a user (the
// tenant, or the platform operator for the ProviderConfig) can fix it.
type kroError struct {
	message   string
	userFault bool
}

func (e *kroError) Error() string { return e.message }

func invalid(message string) error   { return &kroError{message: message, userFault: true} }
func transient(message string) error { return &kroError{message: message} }

// answer is err as the contract's error: invalid input looked at again
// after requeue seconds, or a transient failure.
func answer(err error, requeue uint32) error {
	var e *kroError
	if errors.As(err, &e) && e.userFault {
		return &sp.InvalidInputError{Message: e.message, RequeueAfterSeconds: requeue}
	}
	return err
}

func (kro) Plan(in sp.Input) (sp.Plan, error) {
	var config *providerConfigSpec
	if in.ProviderConfig != nil {
		var err error
		if config, err = readProviderConfig(*in.ProviderConfig); err != nil {
			return sp.Plan{}, answer(invalid("invalid ProviderConfig: "+err.Error()), defaultPollSeconds)
		}
	}
	poll, err := pollIntervalSeconds(config)
	if err != nil {
		return sp.Plan{}, answer(err, defaultPollSeconds)
	}
	plan, err := planFor(in, config, poll)
	return plan, answer(err, poll)
}

// observedObject is the first (and only) object of an observation,
// decoded; nil when there is none.
func observedObject(in sp.Input, id string) (any, error) {
	objects, _ := in.ObservedObjects(id)
	if len(objects) == 0 {
		return nil, nil
	}
	object, ok := decode(objects[0])
	if !ok {
		return nil, transient("observed object " + quote(id) + " is not a JSON document")
	}
	return object, nil
}

func planFor(in sp.Input, config *providerConfigSpec, poll uint32) (sp.Plan, error) {
	requested, err := kroSpec(in.Object)
	if err != nil {
		return sp.Plan{}, invalid("invalid Kro object: " + err.Error())
	}
	tenant := in.Context.TenantNamespace
	v, err := resolveVersion(config, requested)
	if err != nil {
		return sp.Plan{}, err
	}
	images, err := imagePullSecrets(v.HelmValues)
	if err != nil {
		return sp.Plan{}, err
	}
	kubeconfig := in.Context.ControlPlane
	if kubeconfig == nil {
		return sp.Plan{}, transient("ControlPlane access has not been granted yet")
	}
	repository, err := observedObject(in, observeOCIRepository)
	if err != nil {
		return sp.Plan{}, err
	}
	release, err := observedObject(in, observeHelmRelease)
	if err != nil {
		return sp.Plan{}, err
	}
	return sp.Plan{
		Objects: desiredObjects(v, len(images) > 0, tenant, kubeconfig),
		Copies:  secretCopies(v, images, tenant),
		Status: report(&expected{
			ociRepository:   asRead(ociRepositoryObject(v, tenant)),
			helmRelease:     asRead(helmReleaseObject(v, tenant, kubeconfig)),
			version:         v,
			providerConfig:  in.Context.ProviderName,
			podNamespace:    in.Context.PodNamespace,
			tenantNamespace: tenant,
		}, repository, release),
		RequeueAfterSeconds: poll,
	}, nil
}

func init() { sp.Export(kro{}) }

func main() {}
