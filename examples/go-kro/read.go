package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Reading the inputs the plugin acts on (the Kro object, the
// ProviderConfig, the Helm values) from JSON, with messages that name the
// field and say what is wrong with it. The words are guest-kro's
// (guest-kro/src/read.rs), so that both plugins answer alike: a missing
// field and a null one are the same; unknown fields are ignored.

// decode parses a JSON document into nil, bool, json.Number, string, []any
// or map[string]any. Numbers stay as written, so values pass through
// unchanged.
func decode(text string) (any, bool) {
	// Valid: one document and nothing after it.
	if !json.Valid([]byte(text)) {
		return nil, false
	}
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.UseNumber()
	var value any
	if decoder.Decode(&value) != nil {
		return nil, false
	}
	return value, true
}

// what a value is, for "must be a string, not a number".
func what(value any) string {
	switch value.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	default:
		return "an object"
	}
}

func wrong(value any, path, expected string) error {
	return fmt.Errorf("%s must be %s, not %s", path, expected, what(value))
}

func asObject(value any, path string) (map[string]any, error) {
	if object, ok := value.(map[string]any); ok {
		return object, nil
	}
	return nil, wrong(value, path, "an object")
}

func asList(value any, path string) ([]any, error) {
	if list, ok := value.([]any); ok {
		return list, nil
	}
	return nil, wrong(value, path, "a list")
}

// field is object[key], and false when it is missing or null.
func field(object map[string]any, key string) (any, bool) {
	value, ok := object[key]
	return value, ok && value != nil
}

func optionalString(object map[string]any, path, key string) (*string, error) {
	value, ok := field(object, key)
	if !ok {
		return nil, nil
	}
	text, ok := value.(string)
	if !ok {
		return nil, wrong(value, path+"."+key, "a string")
	}
	return &text, nil
}

func requiredString(object map[string]any, path, key string) (string, error) {
	text, err := optionalString(object, path, key)
	if err != nil {
		return "", err
	}
	if text == nil {
		return "", fmt.Errorf("%s.%s is missing", path, key)
	}
	return *text, nil
}

// spec is the `spec` of a Kubernetes object given as JSON text.
func spec(text string) (map[string]any, error) {
	document, ok := decode(text)
	if !ok {
		return nil, fmt.Errorf("the object is not a JSON document")
	}
	object, err := asObject(document, "the object")
	if err != nil {
		return nil, err
	}
	value, ok := field(object, "spec")
	if !ok {
		return nil, fmt.Errorf("spec is missing")
	}
	return asObject(value, "spec")
}

// kroSpec is the `spec` of a Kro object: the version the tenant asks for.
func kroSpec(text string) (string, error) {
	s, err := spec(text)
	if err != nil {
		return "", err
	}
	return requiredString(s, "spec", "version")
}

// kroVersion is one offered kro version and the artifacts it maps to.
type kroVersion struct {
	Version         string
	ChartVersion    string
	ChartURL        *string
	ChartPullSecret *string
	// HelmValues as written, nil when unset or null.
	HelmValues any
}

// providerConfigSpec is the `spec` of the ProviderConfig.
type providerConfigSpec struct {
	Versions     []kroVersion
	PollInterval *string
}

func readProviderConfig(text string) (*providerConfigSpec, error) {
	s, err := spec(text)
	if err != nil {
		return nil, err
	}
	const path = "spec.versions"
	value, ok := field(s, "versions")
	if !ok {
		return nil, fmt.Errorf("%s is missing", path)
	}
	list, err := asList(value, path)
	if err != nil {
		return nil, err
	}
	config := &providerConfigSpec{Versions: make([]kroVersion, 0, len(list))}
	for index, item := range list {
		version, err := readVersion(item, path+"["+strconv.Itoa(index)+"]")
		if err != nil {
			return nil, err
		}
		config.Versions = append(config.Versions, version)
	}
	if config.PollInterval, err = optionalString(s, "spec", "pollInterval"); err != nil {
		return nil, err
	}
	return config, nil
}

func readVersion(value any, path string) (kroVersion, error) {
	var v kroVersion
	object, err := asObject(value, path)
	if err != nil {
		return v, err
	}
	if v.Version, err = requiredString(object, path, "version"); err != nil {
		return v, err
	}
	if v.ChartVersion, err = requiredString(object, path, "chartVersion"); err != nil {
		return v, err
	}
	if v.ChartURL, err = optionalString(object, path, "chartURL"); err != nil {
		return v, err
	}
	if v.ChartPullSecret, err = optionalString(object, path, "chartPullSecret"); err != nil {
		return v, err
	}
	v.HelmValues, _ = field(object, "helmValues")
	return v, nil
}

// imagePullSecretNames are the names under `imagePullSecrets` of a
// version's Helm values, in order and as written (an unset name is empty).
func imagePullSecretNames(values any) ([]string, error) {
	object, err := asObject(values, "helmValues")
	if err != nil {
		return nil, err
	}
	value, ok := field(object, "imagePullSecrets")
	if !ok {
		return nil, nil
	}
	const path = "helmValues.imagePullSecrets"
	list, err := asList(value, path)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for index, item := range list {
		itemPath := path + "[" + strconv.Itoa(index) + "]"
		reference, err := asObject(item, itemPath)
		if err != nil {
			return nil, err
		}
		name, err := optionalString(reference, itemPath, "name")
		if err != nil {
			return nil, err
		}
		if name == nil {
			names = append(names, "")
		} else {
			names = append(names, *name)
		}
	}
	return names, nil
}
