package blob

import "fmt"

// Condition is a write's precondition: unconditional (the zero value), the key
// must not exist (IfNotExist), or the key must hold one generation
// (IfGenerationMatch). It is one value so that a write cannot ask for two
// contradictory things, as arrow-rs object_store's PutMode does.
type Condition struct {
	mode       conditionMode
	generation string
}

type conditionMode uint8

const (
	unconditional conditionMode = iota
	notExist
	generationMatch
)

// IfNotExist makes a write fail with ErrExists if the key exists.
func IfNotExist() Condition { return Condition{mode: notExist} }

// IfGenerationMatch makes a write fail with ErrPrecondition unless the key's
// current generation is gen (Attributes.Generation). An empty gen is invalid:
// it is refused before any I/O rather than read as "unconditional".
func IfGenerationMatch(gen string) Condition {
	return Condition{mode: generationMatch, generation: gen}
}

// IsZero reports whether c is unconditional.
func (c Condition) IsZero() bool { return c.mode == unconditional }

// NotExist reports whether c is IfNotExist.
func (c Condition) NotExist() bool { return c.mode == notExist }

// Generation returns the generation c requires, if it is IfGenerationMatch.
func (c Condition) Generation() (string, bool) {
	return c.generation, c.mode == generationMatch
}

// GenerationMatch returns the generation c requires, or "" unless c is
// IfGenerationMatch: the form most backends' If-Match headers take.
func (c Condition) GenerationMatch() string {
	if c.mode != generationMatch {
		return ""
	}
	return c.generation
}

// Validate returns an ErrInvalidArgument *Error for op on key if c cannot be
// checked (IfGenerationMatch of an empty generation).
func (c Condition) Validate(op, key string) error {
	if c.mode == generationMatch && c.generation == "" {
		return Errorf(op, key, ErrInvalidArgument, "IfGenerationMatch with an empty generation")
	}
	return nil
}

func (c Condition) String() string {
	switch c.mode {
	case notExist:
		return "IfNotExist"
	case generationMatch:
		return fmt.Sprintf("IfGenerationMatch(%q)", c.generation)
	}
	return "unconditional"
}
