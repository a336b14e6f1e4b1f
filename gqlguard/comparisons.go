package gqlguard

import "github.com/vektah/gqlparser/v2/ast"

// withinComparisons reports whether validating doc's rule "overlapping fields can be merged"
// makes at most max field comparisons. It follows the rule as gqlparser implements it (every
// selection set compares the fields sharing a response name pairwise, recursing into their
// sub-selections, and each fragment spread in it against those fields and against the other
// spreads, fragment pairs once) and stops counting at max, so it costs O(max) plus the size
// of doc, whatever doc is.
func withinComparisons(doc *ast.QueryDocument, max int) bool {
	return countComparisons(doc, max) <= max
}

// countComparisons returns how many comparisons validating doc makes, or max+1 when more.
func countComparisons(doc *ast.QueryDocument, max int) int {
	c := &comparisons{
		doc: doc, left: max,
		flat:      map[setKey]*flatSet{},
		fragPairs: map[[2]string]bool{},
		fragments: map[string]*ast.FragmentDefinition{},
		visiting:  map[string]bool{},
	}
	for _, f := range doc.Fragments {
		if _, ok := c.fragments[f.Name]; !ok {
			c.fragments[f.Name] = f
		}
	}
	for _, op := range doc.Operations {
		if !c.walk(op.SelectionSet) {
			return max + 1
		}
	}
	for _, f := range doc.Fragments {
		if !c.walk(f.SelectionSet) {
			return max + 1
		}
	}
	return max - c.left
}

type comparisons struct {
	doc       *ast.QueryDocument
	left      int
	flat      map[setKey]*flatSet // each selection set flattened once, as gqlparser caches it
	fragPairs map[[2]string]bool  // fragment pairs already compared
	fragments map[string]*ast.FragmentDefinition
	visiting  map[string]bool // fragments being compared with fields, against cycles
}

// setKey identifies a selection set as gqlparser's cache does: by its length and first element.
type setKey struct {
	n     int
	first *ast.Selection
}

// flatSet is a selection set's fields by response name (inline fragments merged in) and the
// fragments it spreads.
type flatSet struct {
	fields  map[string][]*ast.Field
	spreads []string
}

// spend takes n comparisons from the budget and reports whether any were left.
func (c *comparisons) spend(n int) bool {
	c.left -= n
	return c.left >= 0
}

// walk visits set and every selection set below it, as the validator's walker does.
func (c *comparisons) walk(set ast.SelectionSet) bool {
	if !c.within(set) {
		return false
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if !c.walk(s.SelectionSet) {
				return false
			}
		case *ast.InlineFragment:
			if !c.walk(s.SelectionSet) {
				return false
			}
		}
	}
	return true
}

func (c *comparisons) flatten(set ast.SelectionSet) *flatSet {
	key := setKey{n: len(set)}
	if len(set) > 0 {
		key.first = &set[0]
	}
	if f, ok := c.flat[key]; ok {
		return f
	}
	f := &flatSet{fields: map[string][]*ast.Field{}}
	var add func(ast.SelectionSet)
	add = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				name := s.Alias
				if name == "" {
					name = s.Name
				}
				f.fields[name] = append(f.fields[name], s)
			case *ast.InlineFragment:
				add(s.SelectionSet)
			case *ast.FragmentSpread:
				f.spreads = append(f.spreads, s.Name)
			}
		}
	}
	add(set)
	c.flat[key] = f
	return f
}

// within counts the comparisons inside one selection set.
func (c *comparisons) within(set ast.SelectionSet) bool {
	if len(set) == 0 {
		return true
	}
	f := c.flatten(set)
	for _, same := range f.fields {
		for i := range same {
			for j := i + 1; j < len(same); j++ {
				if !c.spend(1) || !c.fields(same[i], same[j]) {
					return false
				}
			}
		}
	}
	for i, a := range f.spreads {
		if !c.fieldsAndFragment(f, a) {
			return false
		}
		for _, b := range f.spreads[i+1:] {
			if !c.spend(1) || !c.fragmentPair(a, b) {
				return false
			}
		}
	}
	return true
}

// fields counts comparing two fields of one response name: their sub-selections, if both have.
func (c *comparisons) fields(a, b *ast.Field) bool {
	if len(a.SelectionSet) == 0 || len(b.SelectionSet) == 0 {
		return true
	}
	return c.between(c.flatten(a.SelectionSet), c.flatten(b.SelectionSet))
}

// between counts comparing two sub-selections: their fields, each one's fragments against the
// other's fields, and their fragments pairwise.
func (c *comparisons) between(a, b *flatSet) bool {
	if !c.betweenFields(a, b) {
		return false
	}
	for _, s := range b.spreads {
		if !c.fieldsAndFragment(a, s) {
			return false
		}
	}
	for _, s := range a.spreads {
		if !c.fieldsAndFragment(b, s) {
			return false
		}
		for _, t := range b.spreads {
			if !c.spend(1) || !c.fragmentPair(s, t) {
				return false
			}
		}
	}
	return true
}

// betweenFields counts comparing the fields of a with those of b of the same response name.
func (c *comparisons) betweenFields(a, b *flatSet) bool {
	for name, as := range a.fields {
		bs := b.fields[name]
		for _, fa := range as {
			for _, fb := range bs {
				if !c.spend(1) || !c.fields(fa, fb) {
					return false
				}
			}
		}
	}
	return true
}

// fieldsAndFragment counts comparing a set's fields with a fragment's, and with the fragments
// it spreads.
func (c *comparisons) fieldsAndFragment(f *flatSet, name string) bool {
	frag := c.fragments[name]
	if frag == nil || c.visiting[name] {
		return true // unknown, or a cycle: other rules report both
	}
	if !c.spend(1) {
		return false
	}
	c.visiting[name] = true
	defer delete(c.visiting, name)
	g := c.flatten(frag.SelectionSet)
	if !c.betweenFields(f, g) {
		return false
	}
	for _, s := range g.spreads {
		if !c.fieldsAndFragment(f, s) {
			return false
		}
	}
	return true
}

// fragmentPair counts comparing two fragments, and what they spread, once per pair.
func (c *comparisons) fragmentPair(a, b string) bool {
	if a == b {
		return true
	}
	key := [2]string{min(a, b), max(a, b)}
	if c.fragPairs[key] {
		return true
	}
	c.fragPairs[key] = true
	fa, fb := c.fragments[a], c.fragments[b]
	if fa == nil || fb == nil {
		return true
	}
	ga, gb := c.flatten(fa.SelectionSet), c.flatten(fb.SelectionSet)
	if !c.betweenFields(ga, gb) {
		return false
	}
	for _, s := range gb.spreads {
		if !c.spend(1) || !c.fragmentPair(a, s) {
			return false
		}
	}
	for _, s := range ga.spreads {
		if !c.spend(1) || !c.fragmentPair(s, b) {
			return false
		}
	}
	return true
}
