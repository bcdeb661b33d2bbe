internal import CCurl

/// What libcurl's multi socket API asks of the code that drives it (CURLMOPT_SOCKETFUNCTION,
/// CURLMOPT_TIMERFUNCTION), as Swift calls: the C trampolines stay in this file. Called on the
/// thread that drives the multi handle, from inside `CurlMulti`'s calls (docs/ENGINE.md).
package protocol CurlMultiDelegate: AnyObject {
    /// Watch `fd` for reading and/or writing (neither: keep it registered, with no interest).
    /// False if it cannot be watched (libcurl then fails the transfer).
    func curlWatch(_ fd: Int32, read: Bool, write: Bool) -> Bool
    /// libcurl is done with `fd` (CURL_POLL_REMOVE).
    func curlUnwatch(_ fd: Int32)
    /// Call `CurlMulti.timeout()` in `milliseconds` (0: as soon as possible); each call replaces the
    /// previous timer, and -1 removes it.
    func curlSetTimer(milliseconds: Int)
}

/// Owns one `CURLM*` multi handle, driven by an event loop through the multi socket API.
package final class CurlMulti {
    private let handle: UnsafeMutableRawPointer
    private var running: Int32 = 0
    private var closed = false
    /// The multi handle's owner, which owns it (so never released while libcurl can call it).
    package unowned(unsafe) var delegate: (any CurlMultiDelegate)?

    package init() {
        CurlGlobal.initOnce()
        guard let m = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        handle = m
        let me = Unmanaged.passUnretained(self).toOpaque()
        precondition(tp_multi_setopt_socket_cb(handle, multiSocketCallback) == CURLM_OK, "CURLMOPT_SOCKETFUNCTION")
        precondition(tp_multi_setopt_ptr(handle, CURLMOPT_SOCKETDATA, me) == CURLM_OK, "CURLMOPT_SOCKETDATA")
        precondition(tp_multi_setopt_timer_cb(handle, multiTimerCallback) == CURLM_OK, "CURLMOPT_TIMERFUNCTION")
        precondition(tp_multi_setopt_ptr(handle, CURLMOPT_TIMERDATA, me) == CURLM_OK, "CURLMOPT_TIMERDATA")
    }

    deinit {
        close()
    }

    /// `curl_multi_cleanup`, at once: libcurl may still call the delegate (CURL_POLL_REMOVE for the
    /// sockets it closes), so an owner that is going away calls this from its `deinit`, while it can
    /// still answer. Nothing else may be called afterwards.
    package func close() {
        guard !closed else { return }
        closed = true
        curl_multi_cleanup(handle)
    }

    /// Starts `easy`'s transfer; `context` (not retained: the caller keeps it alive until the
    /// transfer is removed) comes back from `nextFinished()`.
    package func add(_ easy: CurlEasy, context: AnyObject) throws(CurlError) {
        try easy.setPrivate(Unmanaged.passUnretained(context).toOpaque())
        let rc = curl_multi_add_handle(handle, easy.handle)
        guard rc == CURLM_OK else { throw CurlError(multi: rc) }
    }

    /// Takes `easy` out (a connect-only connection it made closes with the easy handle's cleanup).
    package func remove(_ easy: CurlEasy) {
        _ = curl_multi_remove_handle(handle, easy.handle)
    }

    /// `fd` is ready (CURL_CSELECT_IN/OUT/ERR): libcurl does what it can now.
    package func socketAction(_ fd: Int32, readable: Bool, writable: Bool, failed: Bool) {
        var flags: Int32 = 0
        if readable { flags |= CURL_CSELECT_IN }
        if writable { flags |= CURL_CSELECT_OUT }
        if failed { flags |= CURL_CSELECT_ERR }
        _ = curl_multi_socket_action(handle, curl_socket_t(fd), flags, &running)
    }

    /// The timer asked for with `curlSetTimer` is due (CURL_SOCKET_TIMEOUT).
    package func timeout() {
        _ = curl_multi_socket_action(handle, tp_socket_timeout(), 0, &running)
    }

    /// A finished transfer (CURLMSG_DONE): its context and, unless it succeeded, why it failed.
    package func nextFinished() -> (context: AnyObject, failure: CurlError?)? {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(handle, &left) {
            guard msg.pointee.msg == CURLMSG_DONE else { continue }
            var raw: UnsafeMutableRawPointer? = nil
            _ = tp_easy_getinfo_ptr(msg.pointee.easy_handle, CURLINFO_PRIVATE, &raw)
            let result = tp_msg_result(msg)
            guard let raw else { continue }
            let context = Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue()
            return (context, result == CURLE_OK ? nil : CurlError(result))
        }
        return nil
    }
}

// C callbacks (no captures: the multi travels through the user pointers).

private let multiSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 =
    { _, fd, what, user, _ in
        let multi = Unmanaged<CurlMulti>.fromOpaque(user!).takeUnretainedValue()
        guard let delegate = multi.delegate else { return 0 }
        if what == CURL_POLL_REMOVE {
            delegate.curlUnwatch(Int32(fd))
            return 0
        }
        return delegate.curlWatch(Int32(fd), read: what & CURL_POLL_IN != 0, write: what & CURL_POLL_OUT != 0) ? 0 : -1
    }

private let multiTimerCallback: @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32 = { _, ms, user in
    let multi = Unmanaged<CurlMulti>.fromOpaque(user!).takeUnretainedValue()
    multi.delegate?.curlSetTimer(milliseconds: ms)
    return 0
}
