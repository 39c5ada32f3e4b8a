// The repository's test helpers build on the shipped test-PKI library; re-exported so a test file needs one
// import for both.
@_exported public import PinningPKI
