package driver

// Operation names, the Op of every *blob.Error a driver returns.
const (
	OpRead     = "read"
	OpWrite    = "write"
	OpStat     = "stat"
	OpList     = "list"
	OpDelete   = "delete"
	OpCopy     = "copy"
	OpAppend   = "append"
	OpPrewarm  = "prewarm"
	OpCreate   = "create"
	OpFinalize = "finalize"
	OpOpen     = "open"
	OpClose    = "close"
)
