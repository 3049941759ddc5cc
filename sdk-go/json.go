package serviceprovider

import (
	"encoding/json"
	"fmt"
)

// The JSON forms are the Rust SDK's (serde, externally tagged variants), so
// cases and answers read the same in both languages: a scope is "tenant",
// {"named":"x"}, "cluster-scoped" or "any"; a copy kind {"secret":"type"}
// or "config-map"; a cleanup plan {"blocked":{…}} or {"teardown":{…}}.

var scopeNames = map[scopeKind]string{scopeTenant: "tenant", scopeClusterScoped: "cluster-scoped", scopeAny: "any"}

// MarshalJSON writes the Rust SDK's form.
func (s NamespaceScope) MarshalJSON() ([]byte, error) {
	if s.kind == scopeNamed {
		return json.Marshal(map[string]string{"named": s.name})
	}
	return json.Marshal(scopeNames[s.kind])
}

// UnmarshalJSON reads the Rust SDK's form.
func (s *NamespaceScope) UnmarshalJSON(data []byte) error {
	var word string
	if json.Unmarshal(data, &word) == nil {
		for kind, name := range scopeNames {
			if name == word {
				*s = NamespaceScope{kind: kind}
				return nil
			}
		}
		return fmt.Errorf("unknown namespace scope %q", word)
	}
	var named struct {
		Named *string `json:"named"`
	}
	if err := json.Unmarshal(data, &named); err != nil || named.Named == nil {
		return fmt.Errorf("a namespace scope is a word or {\"named\": …}, not %s", data)
	}
	*s = Named(*named.Named)
	return nil
}

// MarshalJSON writes the Rust SDK's form.
func (k CopyKind) MarshalJSON() ([]byte, error) {
	if k.secret {
		return json.Marshal(map[string]string{"secret": k.secretType})
	}
	return json.Marshal("config-map")
}

// UnmarshalJSON reads the Rust SDK's form.
func (k *CopyKind) UnmarshalJSON(data []byte) error {
	var word string
	if json.Unmarshal(data, &word) == nil && word == "config-map" {
		*k = ConfigMapKind()
		return nil
	}
	var secret struct {
		Secret *string `json:"secret"`
	}
	if err := json.Unmarshal(data, &secret); err != nil || secret.Secret == nil {
		return fmt.Errorf("a copy kind is \"config-map\" or {\"secret\": …}, not %s", data)
	}
	*k = SecretOfType(*secret.Secret)
	return nil
}

type cleanupPlanJSON struct {
	Blocked  *Blocked  `json:"blocked,omitempty"`
	Teardown *Teardown `json:"teardown,omitempty"`
}

// MarshalJSON writes the Rust SDK's form.
func (p CleanupPlan) MarshalJSON() ([]byte, error) {
	if b, ok := p.Blocked(); ok {
		return json.Marshal(cleanupPlanJSON{Blocked: &b})
	}
	t, _ := p.Teardown()
	return json.Marshal(cleanupPlanJSON{Teardown: &t})
}

// UnmarshalJSON reads the Rust SDK's form.
func (p *CleanupPlan) UnmarshalJSON(data []byte) error {
	var v cleanupPlanJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if (v.Blocked == nil) == (v.Teardown == nil) {
		return fmt.Errorf("a cleanup plan is {\"blocked\": …} or {\"teardown\": …}, not %s", data)
	}
	*p = CleanupPlan{blocked: v.Blocked, teardown: v.Teardown}
	return nil
}

// ErrorJSON is an error as the Rust SDK's PlanError: {"invalid-input":
// {…}} or {"transient": "…"}.
func ErrorJSON(err error) ([]byte, error) {
	if invalid, ok := invalidInput(err); ok {
		return json.Marshal(map[string]*InvalidInputError{"invalid-input": invalid})
	}
	return json.Marshal(map[string]string{"transient": err.Error()})
}
