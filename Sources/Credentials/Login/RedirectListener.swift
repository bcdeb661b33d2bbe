import Config

/// The loopback listener a browser login waits on (RFC 8252 §7.3). Its sockets and HTTP parsing live
/// in the LoginListener module, a layer above this one (docs/ARCHITECTURE.md "Modules"): the command
/// line hands `LoopbackListener.bind` in through `BrowserLoginOptions.listen`, so Credentials depends
/// neither on HTTP1 nor on that module.
public protocol RedirectListener: AnyObject {
    /// The redirect URI as sent, with the bound port.
    var redirectURI: String { get }
    /// Waits for the request (or, with `pasteFD`, the pasted address) that ends the login, at most
    /// `timeout` seconds; each is decided by `rules`. `say` tells the person why one was refused.
    func wait(rules: CallbackRules, timeout: Double, pasteFD: Int32?, say: @escaping (String) -> Void) throws -> RedirectOutcome
    func close()
}

/// How the wait for the redirect ended.
public enum RedirectOutcome {
    /// The browser's connection waits for the page (nil when the address was pasted).
    case code(String, reply: (any RedirectReply)?)
    case denied(error: String, description: String?, reply: (any RedirectReply)?)
    case timedOut
}

/// The browser's connection that ended the wait: it gets the page that says how the login went.
public protocol RedirectReply: AnyObject {
    func send(status: Int, reason: String, title: String, message: String)
}
