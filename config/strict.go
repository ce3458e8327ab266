package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// file is a configuration: defaults, then validation.
type file[T any] interface {
	*T
	SetDefaults()
	Validate() error
}

// load reads path and parses it as a T.
func load[T any, P file[T]](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse[T, P](path, b)
}

// parse decodes b strictly, sets defaults and validates; every problem is
// reported at once, each prefixed with name.
func parse[T any, P file[T]](name string, b []byte) (*T, error) {
	var c T
	if err := decodeStrict(b, &c); err != nil {
		return nil, prefixErrors(name, err)
	}
	P(&c).SetDefaults()
	if err := P(&c).Validate(); err != nil {
		return nil, prefixErrors(name, err)
	}
	return &c, nil
}

// decodeStrict decodes YAML into v, rejecting duplicate and unknown keys.
// Unlike the library's own strict mode it names every unknown key with its
// full field path (probing.bogus) and reports them all at once, and it
// names the field of a value that does not fit its type.
func decodeStrict(b []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return errors.New(cleanYAMLError(err))
	}
	var tree any
	if err := json.Unmarshal(j, &tree); err != nil {
		return errors.New(cleanYAMLError(err))
	}
	if tree == nil {
		return errors.New("file is empty")
	}
	var errs []error
	walkSchema(reflect.TypeOf(v).Elem(), tree, "", &errs)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := json.Unmarshal(j, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: %s does not fit (want %s)", te.Field, te.Value, te.Type)
		}
		return errors.New(cleanYAMLError(err))
	}
	return nil
}

var durationType = reflect.TypeOf(Duration(0))

// walkSchema checks the decoded tree against the Go type t: unknown keys,
// objects where scalars belong, and duration strings.
func walkSchema(t reflect.Type, node any, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func(p string) string {
		if p == "" {
			return "(top level)"
		}
		return p
	}
	if t == durationType {
		var d Duration
		raw, _ := json.Marshal(node)
		if err := d.UnmarshalJSON(raw); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %v", at(path), err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := node.(map[string]any)
		if !ok {
			if node != nil {
				*errs = append(*errs, fmt.Errorf("%s: want a mapping of fields, got %s", at(path), describe(node)))
			}
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				*errs = append(*errs, fmt.Errorf("%s: unknown field (known: %s)", join(path, k), knownFields(fields)))
				continue
			}
			walkSchema(ft, obj[k], join(path, k), errs)
		}
	case reflect.Slice:
		list, ok := node.([]any)
		if !ok {
			if node != nil {
				*errs = append(*errs, fmt.Errorf("%s: want a list, got %s", at(path), describe(node)))
			}
			return
		}
		for i, e := range list {
			walkSchema(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		obj, ok := node.(map[string]any)
		if !ok {
			if node != nil {
				*errs = append(*errs, fmt.Errorf("%s: want a mapping, got %s", at(path), describe(node)))
			}
			return
		}
		for k, e := range obj {
			walkSchema(t.Elem(), e, join(path, k), errs)
		}
	case reflect.String:
		if _, ok := node.(string); !ok && node != nil {
			*errs = append(*errs, fmt.Errorf("%s: want a string, got %s", at(path), describe(node)))
		}
	case reflect.Int, reflect.Int64, reflect.Uint16, reflect.Float64:
		n, ok := node.(float64)
		if !ok && node != nil {
			*errs = append(*errs, fmt.Errorf("%s: want a number, got %s", at(path), describe(node)))
		} else if ok && t.Kind() != reflect.Float64 && n != float64(int64(n)) {
			*errs = append(*errs, fmt.Errorf("%s: want a whole number, got %g", at(path), n))
		}
	case reflect.Bool:
		if _, ok := node.(bool); !ok && node != nil {
			*errs = append(*errs, fmt.Errorf("%s: want true or false, got %s", at(path), describe(node)))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func knownFields(m map[string]reflect.Type) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("%t", v)
	case float64:
		return fmt.Sprintf("the number %g", v)
	}
	return fmt.Sprintf("%v", v)
}
