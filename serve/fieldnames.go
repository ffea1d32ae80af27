package serve

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/spl-dev/spl/records"
)

// checkFieldNames refuses a key of the JSON object data that is not
// exactly the name of a field of the struct v points to. encoding/json
// matches names without regard to case, so {"Thread": …} would be taken
// as "thread", and {"thread": "a", "THREAD": "b"} would keep "b" silently;
// the API's fields have one spelling. data has decoded into v already.
func checkFieldNames(data []byte, v any) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return fmt.Errorf("field names: %w", err)
	}
	t := reflect.TypeOf(v).Elem()
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !names[k] {
			return &records.FieldError{Field: k, Rule: "unknown field (field names are case-sensitive)"}
		}
	}
	return nil
}
