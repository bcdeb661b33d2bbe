internal import CCurl
import Glibc
import HTTP1

/// A failed libcurl call, with curl's own words for it.
public struct CurlError: Error, CustomStringConvertible, Sendable {
    public let code: Int
    public let message: String
    init(_ code: CURLcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_easy_strerror(code))
    }
    init(multi code: CURLMcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_multi_strerror(code))
    }
    public var description: String { message }
}

/// Owns one `CURL*` easy handle. The only file besides CurlMulti.swift that touches libcurl's
/// C API; every CURLcode is checked.
final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    /// The request's header lines as libcurl reads them: list nodes and NUL-terminated text that this
    /// handle owns and reuses, so a request costs no malloc per line (curl_slist_append would make two).
    private var nodes: UnsafeMutablePointer<curl_slist>? = nil
    private var nodeCapacity = 0
    private var text: UnsafeMutablePointer<CChar>? = nil
    private var textCapacity = 0
    /// The options that never change have been set (they survive between transfers).
    var configured = false

    init() {
        CurlGlobal.initOnce()
        guard let h = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        handle = h
    }

    deinit {
        curl_easy_cleanup(handle)
        nodes?.deallocate()
        text?.deallocate()
    }

    func set(_ option: CURLoption, _ value: Int) throws {
        let rc = tp_easy_setopt_long(handle, option, value)
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    func set(_ option: CURLoption, int64 value: Int64) throws {
        let rc = tp_easy_setopt_off(handle, option, curl_off_t(value))
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    /// libcurl copies string options (since 7.17), so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String?) throws {
        let rc: CURLcode
        if let value {
            rc = value.withCString { tp_easy_setopt_str(handle, option, $0) }
        } else {
            rc = tp_easy_setopt_str(handle, option, nil)
        }
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws {
        let rc = tp_easy_setopt_ptr(handle, option, pointer)
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    func setDataCallback(_ option: CURLoption, _ cb: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int) throws {
        let rc = tp_easy_setopt_write_cb(handle, option, cb)
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    /// Points CURLOPT_HTTPHEADER at `lines`, copied into storage this handle owns (grown when needed,
    /// never while a transfer uses it: this runs before the handle joins the multi).
    func setHeaders(_ lines: HeaderLines) throws {
        let count = lines.count
        if count == 0 {
            let rc = tp_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nil)
            guard rc == CURLE_OK else { throw CurlError(rc) }
            return
        }
        if count > nodeCapacity {
            nodes?.deallocate()
            nodeCapacity = max(count, 2 * nodeCapacity, 16)
            nodes = UnsafeMutablePointer<curl_slist>.allocate(capacity: nodeCapacity)
        }
        let byteCount = lines.bytes.count
        if byteCount > textCapacity {
            text?.deallocate()
            textCapacity = max(byteCount, 2 * textCapacity, 1024)
            text = UnsafeMutablePointer<CChar>.allocate(capacity: textCapacity)
        }
        let nodes = self.nodes!, text = self.text!
        lines.bytes.withUnsafeBytes { raw in
            UnsafeMutableRawPointer(text).copyMemory(from: raw.baseAddress!, byteCount: byteCount)
        }
        var offset = 0
        for i in 0..<count {
            let end = lines.ends[i]
            nodes[i] = curl_slist(data: text + offset, next: i + 1 < count ? nodes + i + 1 : nil)
            offset = end + 1  // past the NUL
        }
        let rc = tp_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nodes)
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    func pause(_ bitmask: Int32) -> CURLcode {
        curl_easy_pause(handle, bitmask)
    }

    func responseCode() -> Int {
        var code: Int = 0
        _ = tp_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }
}

/// glibc's mallopt (malloc.h is not in the Glibc module).
@_silgen_name("mallopt")
private func glibcMallopt(_ param: Int32, _ value: Int32) -> Int32

enum CurlGlobal {
    private static let initialized: Bool = {
        let rc = curl_global_init(Int(CURL_GLOBAL_ALL))
        precondition(rc == CURLE_OK, "curl_global_init failed")
        // glibc gives the top of a thread's malloc arena back to the kernel (madvise) whenever more
        // than 128 KiB is free there: with an HTTPS upstream, libcurl and OpenSSL free their record
        // buffers after each response, so that was one madvise (and a malloc_consolidate) per request
        // on every event loop. Keep up to 4 MiB per arena instead.
        _ = glibcMallopt(-1 /* M_TRIM_THRESHOLD */, 4 * 1024 * 1024)
        return true
    }()
    static func initOnce() { _ = initialized }

    /// "libcurl/7.88.1 OpenSSL/3.0.x ..." for the start-up log.
    static var version: String { String(cString: curl_version()) }
}
