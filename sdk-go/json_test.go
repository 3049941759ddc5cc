package serviceprovider

import (
	"encoding/json"
	"testing"
)

// The forms are the Rust SDK's serde forms (sdk/src/contract.rs).
func TestVariantsUseTheRustSDKsJSON(t *testing.T) {
	for _, c := range []struct {
		value any
		want  string
	}{
		{Tenant(), `"tenant"`},
		{Named("kro-system"), `{"named":"kro-system"}`},
		{ClusterScoped(), `"cluster-scoped"`},
		{AnyNamespace(), `"any"`},
		{SecretOfType("kubernetes.io/dockerconfigjson"), `{"secret":"kubernetes.io/dockerconfigjson"}`},
		{ConfigMapKind(), `"config-map"`},
		{Block(Blocked{Message: "m"}), `{"blocked":{"message":"m","requeueAfterSeconds":0,"resources":null}}`},
		{TearDown(Teardown{}), `{"teardown":{"objects":null,"copies":null,"resources":null}}`},
	} {
		got, err := json.Marshal(c.value)
		if err != nil || string(got) != c.want {
			t.Errorf("%#v: %s, %v; want %s", c.value, got, err, c.want)
		}
	}
}

func TestVariantsReadBack(t *testing.T) {
	var scopes []NamespaceScope
	if err := json.Unmarshal([]byte(`["tenant",{"named":"x"},"cluster-scoped","any"]`), &scopes); err != nil {
		t.Fatal(err)
	}
	if name, ok := scopes[1].Namespace(); !ok || name != "x" || scopes[0] != Tenant() || scopes[3] != AnyNamespace() {
		t.Errorf("%+v", scopes)
	}
	var kinds []CopyKind
	if err := json.Unmarshal([]byte(`[{"secret":"Opaque"},"config-map"]`), &kinds); err != nil {
		t.Fatal(err)
	}
	if secretType, ok := kinds[0].SecretType(); !ok || secretType != "Opaque" || kinds[1].Kind() != "ConfigMap" {
		t.Errorf("%+v", kinds)
	}
	var plan CleanupPlan
	if err := json.Unmarshal([]byte(`{"blocked":{"message":"m","requeueAfterSeconds":5,"resources":null}}`), &plan); err != nil {
		t.Fatal(err)
	}
	if b, ok := plan.Blocked(); !ok || b.RequeueAfterSeconds != 5 {
		t.Errorf("%+v", plan)
	}
	for _, bad := range []string{`"nowhere"`, `{"named":1}`, `{}`} {
		if json.Unmarshal([]byte(bad), new(NamespaceScope)) == nil {
			t.Errorf("%s read as a scope", bad)
		}
	}
	if json.Unmarshal([]byte(`{"blocked":{},"teardown":{}}`), new(CleanupPlan)) == nil {
		t.Error("both variants at once read as a cleanup plan")
	}
}

func TestOnlyInvalidInputIsTheTenants(t *testing.T) {
	got, _ := ErrorJSON(InvalidInput(10, "bad %d", 1))
	if string(got) != `{"invalid-input":{"message":"bad 1","requeueAfterSeconds":10}}` {
		t.Errorf("%s", got)
	}
	got, _ = ErrorJSON(Transient("later"))
	if string(got) != `{"transient":"later"}` {
		t.Errorf("%s", got)
	}
}
