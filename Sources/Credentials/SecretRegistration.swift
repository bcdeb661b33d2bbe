import Logs

/// Hands a secret value (an access token, a refresh token, a client secret, a password) to the log
/// redactor so that no log line can carry it, whatever prints it. Every token the manager publishes
/// passes through here. The redactor lives in the Logs module (`SecretRegistry`).
func registerSecret(_ secret: String) {
    SecretRegistry.shared.register(secret)
}
