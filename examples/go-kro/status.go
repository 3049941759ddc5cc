package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

// Status mapping: from the Flux objects' conditions to status.resources and
// the instance's phase and Ready condition (as guest-kro/src/status.rs).

const (
	phaseReady       = "Ready"
	phaseProgressing = "Progressing"
	phaseTerminating = "Terminating"

	conditionReady    = "Ready"
	reasonReconciling = "Reconciling"
	reasonSuccess     = "ReconcileSuccess"
	locationPlatform  = "PlatformCluster"

	// waiting is the Ready message while something is not ready yet (as
	// the Go provider).
	waiting = "Waiting for managed resources to become ready"

	sourceGroup = "source.toolkit.fluxcd.io"
	helmGroup   = "helm.toolkit.fluxcd.io"
	ociKind     = "OCIRepository"
	helmKind    = "HelmRelease"
)

// fluxState is how one Flux object stands, judged against the generation
// of its spec. failed: Flux reports a failure for the current spec.
type fluxState struct {
	phase   string
	message *string
	failed  bool
}

func progressing(message *string) fluxState {
	return fluxState{phase: phaseProgressing, message: message}
}

func waitingForGeneration(generation int64) fluxState {
	message := fmt.Sprintf("waiting for Flux to reconcile generation %d", generation)
	return progressing(&message)
}

// pointer follows a path of object keys, nil where there is nothing.
func pointer(value any, keys ...string) any {
	for _, key := range keys {
		object, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		value = object[key]
	}
	return value
}

// integer is the value at keys if it is an integer.
func integer(value any, keys ...string) *int64 {
	number, ok := pointer(value, keys...).(json.Number)
	if !ok {
		return nil
	}
	i, err := number.Int64()
	if err != nil {
		return nil
	}
	return &i
}

func text(value any, keys ...string) (string, bool) {
	s, ok := pointer(value, keys...).(string)
	return s, ok
}

// judge rates one managed Flux object by its Ready condition, as the real
// controllers write it (see guest-kro's status::judge for the rules).
func judge(object any) fluxState {
	if object == nil {
		return progressing(nil)
	}
	conditions, _ := pointer(object, "status", "conditions").([]any)
	var ready any
	for _, condition := range conditions {
		if kind, ok := text(condition, "type"); ok && kind == conditionReady {
			ready = condition
			break
		}
	}
	if ready == nil {
		return progressing(nil)
	}
	generation := integer(object, "metadata", "generation")
	finished := integer(object, "status", "observedGeneration")
	about := integer(ready, "observedGeneration")
	if about == nil {
		about = finished
	}
	behind := func(observed *int64) bool { return generation != nil && observed != nil && *observed < *generation }
	current := int64(0)
	if generation != nil {
		current = *generation
	}
	if behind(about) {
		return waitingForGeneration(current)
	}
	var message *string
	if m, ok := text(ready, "message"); ok && m != "" {
		message = &m
	}
	status, _ := text(ready, "status")
	switch {
	case status == "True" && behind(finished):
		return waitingForGeneration(current)
	case status == "True":
		return fluxState{phase: phaseReady}
	case status == "False":
		return fluxState{phase: phaseProgressing, message: message, failed: true}
	default:
		return progressing(message)
	}
}

// expected is what a plan applies and knows, to judge the observed Flux
// objects by.
type expected struct {
	ociRepository   any
	helmRelease     any
	version         *kroVersion
	providerConfig  string
	podNamespace    string
	tenantNamespace string
}

// containsAll: live has every field wanted sets, with the same value.
func containsAll(live, wanted any) bool {
	switch wanted := wanted.(type) {
	case map[string]any:
		live, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for key, value := range wanted {
			l, ok := live[key]
			if !ok || !containsAll(l, value) {
				return false
			}
		}
		return true
	case []any:
		live, ok := live.([]any)
		if !ok || len(live) != len(wanted) {
			return false
		}
		for i := range wanted {
			if !containsAll(live[i], wanted[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(live, wanted)
	}
}

// specOutdated: the observed object was read before this plan's spec was
// applied. Objects observed without a spec are not compared.
func specOutdated(observed, desired any) bool {
	observedObject, _ := observed.(map[string]any)
	desiredObject, _ := desired.(map[string]any)
	live, ok := observedObject["spec"]
	if !ok {
		return false
	}
	wanted, ok := desiredObject["spec"]
	return ok && !containsAll(live, wanted)
}

func outdated() fluxState {
	message := "waiting for Flux to reconcile the updated spec"
	return progressing(&message)
}

func containsAny(message string, words ...string) bool {
	lower := strings.ToLower(message)
	for _, word := range words {
		if strings.Contains(lower, word) {
			return true
		}
	}
	return false
}

// explainPullFailure is Flux's message about a failed chart pull, with what
// to do about it (which Secret, which registry, which ProviderConfig field).
func explainPullFailure(message string, e *expected) string {
	v := e.version
	chart := chartURL(v) + ":" + v.ChartVersion
	offer := fmt.Sprintf("version %s of ProviderConfig %s", v.Version, e.providerConfig)
	if containsAny(message, "unauthorized", "authentication required", "denied", "forbidden") {
		if source := chartPullSecret(v); source != "" {
			return fmt.Sprintf("the registry refused the credentials of Secret %s/%s (chartPullSecret of %s, copied to "+
				"%s/%s) for chart %s: update that Secret with credentials that may pull it (Flux: %s)",
				e.podNamespace, source, offer, e.tenantNamespace, chartPullSecretCopyName(source), chart, message)
		}
		return fmt.Sprintf("the registry refused to serve chart %s without credentials: set chartPullSecret of %s "+
			"to a Secret of type %s in namespace %s that may pull it (Flux: %s)",
			chart, offer, dockerConfigJSON, e.podNamespace, message)
	}
	if containsAny(message, "manifest_unknown", "manifest unknown", "name_unknown", "name unknown") {
		return fmt.Sprintf("chart %s was not found in the registry: check chartURL and chartVersion of %s (Flux: %s)",
			chart, offer, message)
	}
	return message
}

// releaseBehindArtifact: the HelmRelease is Ready for an older chart
// artifact than the one the OCIRepository holds now.
func releaseBehindArtifact(repository, release any) *string {
	if repository == nil {
		return nil
	}
	revision, ok := text(repository, "status", "artifact", "revision")
	if !ok {
		return nil
	}
	attempted, ok := text(release, "status", "lastAttemptedRevisionDigest")
	if !ok {
		return nil
	}
	_, digest, ok := strings.Cut(revision, "@")
	if !ok || digest == attempted {
		return nil
	}
	message := "waiting for Flux to install chart revision " + revision
	return &message
}

// report is the status of a plan: each Flux object judged against the spec
// this plan applies, with an explanation of chart pull failures; the first
// failure also goes into the Ready condition's message.
func report(e *expected, repositoryObject, releaseObject any) sp.ServiceStatus {
	var repository fluxState
	if repositoryObject != nil && specOutdated(repositoryObject, e.ociRepository) {
		repository = outdated()
	} else {
		repository = judge(repositoryObject)
	}
	if repository.failed && repository.message != nil {
		explained := explainPullFailure(*repository.message, e)
		repository.message = &explained
	}
	var release fluxState
	if releaseObject != nil && specOutdated(releaseObject, e.helmRelease) {
		release = outdated()
	} else {
		release = judge(releaseObject)
		if releaseObject != nil && release.phase == phaseReady && repository.phase == phaseReady {
			if message := releaseBehindArtifact(repositoryObject, releaseObject); message != nil {
				release = progressing(message)
			}
		}
	}
	var failure *string
	for _, s := range []struct {
		kind, name string
		state      fluxState
	}{{ociKind, ociRepository, repository}, {helmKind, helmRelease, release}} {
		if s.state.failed {
			message := "failed"
			if s.state.message != nil {
				message = *s.state.message
			}
			f := fmt.Sprintf("%s %s: %s", s.kind, s.name, message)
			failure = &f
			break
		}
	}
	tenant := e.tenantNamespace
	return overall([]sp.ResourceStatus{
		entry(sourceGroup, ociKind, ociRepository, tenant, repository.phase, repository.message),
		entry(helmGroup, helmKind, helmRelease, tenant, release.phase, release.message),
	}, failure)
}

func entry(apiGroup, kind, name, namespace, phase string, message *string) sp.ResourceStatus {
	location := locationPlatform
	return sp.ResourceStatus{
		APIGroup: &apiGroup, Kind: kind, Name: name, Namespace: &namespace,
		Phase: phase, Message: message, Location: &location,
	}
}

// terminatingResources: both Flux objects in phase Terminating, as shown
// during deletion.
func terminatingResources(tenant string) []sp.ResourceStatus {
	return []sp.ResourceStatus{
		entry(sourceGroup, ociKind, ociRepository, tenant, phaseTerminating, nil),
		entry(helmGroup, helmKind, helmRelease, tenant, phaseTerminating, nil),
	}
}

// overall: Ready when every managed object is Ready, Progressing
// otherwise; a failure is added to the Ready condition's message, so that
// it also reaches the Event.
func overall(resources []sp.ResourceStatus, failure *string) sp.ServiceStatus {
	ready := true
	for _, r := range resources {
		ready = ready && r.Phase == phaseReady
	}
	condition := sp.Condition{Type: conditionReady}
	phase := phaseReady
	if ready {
		condition.Status, condition.Reason, condition.Message = sp.ConditionTrue, reasonSuccess, "Domain Service is ready"
	} else {
		phase = phaseProgressing
		condition.Status, condition.Reason, condition.Message = sp.ConditionFalse, reasonReconciling, waiting
		if failure != nil {
			condition.Message = waiting + ": " + *failure
		}
	}
	return sp.ServiceStatus{Phase: phase, Conditions: []sp.Condition{condition}, Resources: resources}
}
