package sqlstate

// PostgreSQL's SQLSTATE codes sluice reports, by class.
const (
	// Class 00, 01: success and warnings.
	SuccessfulCompletion = "00000"
	Warning              = "01000"

	// Class 08: connection exception.
	ConnectionFailure = "08006"
	ProtocolViolation = "08P01"

	// Class 0A: feature not supported.
	FeatureNotSupported = "0A000"

	// Class 22: data exception.
	NumericValueOutOfRange    = "22003"
	InvalidDatetimeFormat     = "22007"
	CharacterNotInRepertoire  = "22021"
	InvalidParameterValue     = "22023"
	InvalidTextRepresentation = "22P02"
	InvalidBinaryRepresent    = "22P03"
	BadCopyFileFormat         = "22P04"

	// Class 23: integrity constraint violation.
	IntegrityViolation  = "23000"
	NotNullViolation    = "23502"
	ForeignKeyViolation = "23503"
	UniqueViolation     = "23505"
	CheckViolation      = "23514"

	// Class 25: invalid transaction state.
	ActiveSQLTransaction              = "25001"
	ReadOnlySQLTransaction            = "25006"
	NoActiveSQLTransaction            = "25P01"
	InFailedSQLTransaction            = "25P02"
	IdleInTransactionSessionTimeout   = "25P03"
	InvalidSQLStatementName           = "26000"
	InvalidAuthorizationSpecification = "28000"
	InvalidPassword                   = "28P01"

	// Class 2B: dependent privilege descriptors still exist.
	DependentObjectsStillExist = "2BP01"

	// Class 34: invalid cursor name.
	InvalidCursorName = "34000"

	// Class 40: transaction rollback.
	SerializationFailure = "40001"
	DeadlockDetected     = "40P01"

	// Class 42: syntax error or access rule violation.
	SyntaxErrorOrAccessRuleViolation = "42000"
	InsufficientPrivilege            = "42501"
	SyntaxError                      = "42601"
	AmbiguousColumn                  = "42702"
	UndefinedColumn                  = "42703"
	UndefinedObject                  = "42704"
	GroupingError                    = "42803"
	DatatypeMismatch                 = "42804"
	UndefinedFunction                = "42883"
	UndefinedTable                   = "42P01"
	UndefinedParameter               = "42P02"
	DuplicateCursor                  = "42P03"
	DuplicatePreparedStatement       = "42P05"
	DuplicateTable                   = "42P07"
	DuplicateObject                  = "42710"

	// Class 53, 54, 55: insufficient resources, program limit, object state.
	InsufficientResources  = "53000"
	DiskFull               = "53100"
	OutOfMemory            = "53200"
	TooManyConnections     = "53300"
	ProgramLimitExceeded   = "54000"
	CantChangeRuntimeParam = "55P02"
	QueryCanceled          = "57014"
	AdminShutdown          = "57P01"
	SystemError            = "58000"
	IOError                = "58030"
	ConfigFileError        = "F0000"
	InternalError          = "XX000"
	DataCorrupted          = "XX001"
)

// The SQLSTATEs of MySQL's and MariaDB's errors that sluice sends itself.
const (
	// MySQLGeneral is HY000, the state of most server errors.
	MySQLGeneral = "HY000"
	// MySQLCommunication is 08S01, a communication link failure.
	MySQLCommunication = "08S01"
	// MySQLInterrupted is 70100, a query or connection killed.
	MySQLInterrupted = "70100"
)
