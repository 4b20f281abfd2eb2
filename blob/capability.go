package blob

// Capabilities says which optional interfaces a Store serves natively, as
// opposed to through a helper's fallback. A wrapper implements every optional
// method so that it can pass its inner store's through; Capabilities is how a
// caller (or the conformance suite) learns what the chain below really does.
type Capabilities struct {
	Prewarm  bool // Prewarmer: a warm handle, not an ordinary IfNotExist writer
	Create   bool // Creator: store-chosen names, typically from a pool
	Append   bool // Appender: appends to an existing object
	Copy     bool // Copier: server-side copies
	ReaderAt bool // ReaderAtOpener: a native random-access reader
	Finalize bool // Finalizer: objects stay appendable until sealed
	Retire   bool // Retirer: versions removed from replicas without a write
}

// CapabilityReporter is a Store that says what it serves natively. Wrappers
// and composites implement it; a driver need not, as its methods say it.
type CapabilityReporter interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what s serves natively: what it reports, if it is a
// CapabilityReporter, otherwise the optional interfaces it implements.
func CapabilitiesOf(s Store) Capabilities {
	if r, ok := s.(CapabilityReporter); ok {
		return r.Capabilities()
	}
	_, prewarm := s.(Prewarmer)
	_, create := s.(Creator)
	_, appendOK := s.(Appender)
	_, copyOK := s.(Copier)
	_, readerAt := s.(ReaderAtOpener)
	_, finalize := s.(Finalizer)
	_, retire := s.(Retirer)
	return Capabilities{Prewarm: prewarm, Create: create, Append: appendOK, Copy: copyOK, ReaderAt: readerAt, Finalize: finalize, Retire: retire}
}
