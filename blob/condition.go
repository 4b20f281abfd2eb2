package blob

import "fmt"

// Condition is an operation's precondition on a key: unconditional (the zero
// value), the key must not exist (IfNotExist), or the key must hold one
// generation (IfGenerationMatch). Writes (WriterOptions.If), deletes
// (DeleteOptions.If), appends (AppendOptions.If) and copies, on their
// destination (CopyOptions.If), take it. It is one value so that an
// operation cannot ask for two contradictory things, as arrow-rs
// object_store's PutMode does.
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

// IfNotExist makes a write or a copy fail with ErrExists if the key exists.
// Deletes and appends, which act on an existing object, refuse it
// (CheckDelete, CheckAppend).
func IfNotExist() Condition { return Condition{mode: notExist} }

// IfGenerationMatch makes an operation fail with ErrPrecondition unless the
// key's current generation is gen (Attributes.Generation). An empty gen is
// invalid: it is refused before any I/O rather than read as
// "unconditional".
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

// CheckDelete is the check every Store's Delete makes of its options before
// any I/O. It returns the delete's condition: the zero value (whatever
// version is there) for nil opts, or IfGenerationMatch(gen) to delete that
// generation only. It refuses, with ErrInvalidArgument, IfNotExist (the
// object a delete removes must exist, so the delete could only ever fail)
// and IfGenerationMatch of an empty generation.
func CheckDelete(key string, opts *DeleteOptions) (Condition, error) {
	if opts == nil {
		return Condition{}, nil
	}
	if opts.If.NotExist() {
		return Condition{}, Errorf("delete", key, ErrInvalidArgument, "a delete cannot be IfNotExist: the object it removes must exist, so it could only fail")
	}
	if err := opts.If.Validate("delete", key); err != nil {
		return Condition{}, err
	}
	return opts.If, nil
}

// CheckAppend is the check every Appender makes of its options before any
// I/O. It returns the options to append with: for nil opts, at whatever the
// end is (IfSizeMatch -1) and unconditionally. It refuses, with
// ErrInvalidArgument, IfNotExist (an append extends an existing object and
// no Appender creates one, so the append could only fail) and
// IfGenerationMatch of an empty generation.
func CheckAppend(key string, opts *AppendOptions) (AppendOptions, error) {
	o := AppendOptions{IfSizeMatch: -1}
	if opts != nil {
		o = *opts
	}
	if o.If.NotExist() {
		return AppendOptions{}, Errorf("append", key, ErrInvalidArgument, "an append cannot be IfNotExist: it extends an existing object and never creates one, so it could only fail")
	}
	if err := o.If.Validate("append", key); err != nil {
		return AppendOptions{}, err
	}
	return o, nil
}

// CheckCopy is the check every Copier, and CopyBetween, makes of its
// options before any I/O. It returns the condition on dstKey (the zero
// value for nil opts). generationMatch says whether the caller makes the
// copy itself conditional on dstKey's generation, atomically: a service's
// If-Match on the copy request, or a conditional write of the copied bytes.
// Without it IfGenerationMatch is refused with ErrInvalidArgument, since a
// check of the generation followed by an unconditional copy would replace a
// version written in between; IfGenerationMatch of an empty generation
// always is.
func CheckCopy(dstKey string, opts *CopyOptions, generationMatch bool) (Condition, error) {
	if opts == nil {
		return Condition{}, nil
	}
	if err := opts.If.Validate("copy", dstKey); err != nil {
		return Condition{}, err
	}
	if _, ok := opts.If.Generation(); ok && !generationMatch {
		return Condition{}, Errorf("copy", dstKey, ErrInvalidArgument, "this store cannot make a copy conditional on the destination's generation, and checking it before an unconditional copy would race a concurrent writer")
	}
	return opts.If, nil
}
