package gqlhttp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// mergeDeferred merges a @defer payload (the deferred fields of the object at next.Path) into
// the initial response, for a client that takes one answer. gqlgen leaves each deferred field
// null in the initial data, in its place, so the merge replaces values and keeps the order of
// the fields as the query selected them. A payload whose object is not in the data (an error
// made it null) adds only its errors.
func mergeDeferred(into, next *graphql.Response) {
	into.Errors = append(into.Errors, next.Errors...)
	if len(next.Data) == 0 || bytes.Equal(next.Data, []byte("null")) {
		return
	}
	path := make([]any, len(next.Path))
	for i, p := range next.Path {
		switch p := p.(type) {
		case ast.PathName:
			path[i] = string(p)
		case ast.PathIndex:
			path[i] = int(p)
		}
	}
	if merged, err := mergeAt(into.Data, path, next.Data); err == nil {
		into.Data = merged
	}
}

// mergeAt returns doc with the fields of the object fields set on the object at path.
func mergeAt(doc json.RawMessage, path []any, fields json.RawMessage) (json.RawMessage, error) {
	if len(path) == 0 {
		return mergeObject(doc, fields)
	}
	switch step := path[0].(type) {
	case string:
		obj, err := readObject(doc)
		if err != nil {
			return nil, err
		}
		for i := range obj {
			if obj[i].key == step {
				if obj[i].value, err = mergeAt(obj[i].value, path[1:], fields); err != nil {
					return nil, err
				}
				return writeObject(obj), nil
			}
		}
		return nil, fmt.Errorf("no field %q", step)
	case int:
		var list []json.RawMessage
		if err := json.Unmarshal(doc, &list); err != nil {
			return nil, err
		}
		if step < 0 || step >= len(list) {
			return nil, fmt.Errorf("no index %d", step)
		}
		var err error
		if list[step], err = mergeAt(list[step], path[1:], fields); err != nil {
			return nil, err
		}
		return json.Marshal(list)
	}
	return nil, fmt.Errorf("bad path element %v", path[0])
}

// mergeObject sets each field of fields on the object obj: in place when obj has it, else last.
func mergeObject(doc, fields json.RawMessage) (json.RawMessage, error) {
	obj, err := readObject(doc)
	if err != nil {
		return nil, err
	}
	add, err := readObject(fields)
	if err != nil {
		return nil, err
	}
next:
	for _, f := range add {
		for i := range obj {
			if obj[i].key == f.key {
				obj[i].value = f.value
				continue next
			}
		}
		obj = append(obj, f)
	}
	return writeObject(obj), nil
}

type member struct {
	key   string
	value json.RawMessage
}

// readObject reads a JSON object with its members in order (a map would lose it).
func readObject(doc json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, value: value})
	}
	return out, nil
}

func writeObject(obj []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range obj {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}
