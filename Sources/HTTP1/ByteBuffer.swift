/// A growable run of bytes in memory of its own: the buffers a head is written into and the bytes a
/// connection queues for its socket. An `[UInt8]` costs about a hundred instructions per
/// `append(contentsOf:)` (a uniqueness check, a generic copy loop around the copy); a request writes
/// about a dozen pieces, so this type's `append` is a bounds check and one `memcpy` (docs/ENGINE.md,
/// "Instructions per request against nginx"). A class: the owner (a connection, an exchange) keeps one
/// and lends it to the writers; nothing is copied on the way.
///
/// The memory is taken on the first append, so an idle connection's buffers hold none.
public final class ByteBuffer {
    @usableFromInline var base: UnsafeMutableRawPointer?
    @usableFromInline var used = 0
    @usableFromInline var allocated = 0

    public init() {}

    public convenience init(_ bytes: [UInt8]) {
        self.init()
        append(bytes)
    }

    deinit { base?.deallocate() }

    /// Bytes written so far.
    @inlinable public var count: Int { used }
    @inlinable public var isEmpty: Bool { used == 0 }
    /// Bytes it holds room for without growing.
    public var capacity: Int { allocated }

    /// A copy of the bytes (tests, and the cold paths that want an array).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    // MARK: appending

    @inlinable
    public func append(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        guard n > 0 else { return }
        if allocated - used < n { grow(toHold: used + n) }
        (base.unsafelyUnwrapped + used).copyMemory(from: bytes.baseAddress.unsafelyUnwrapped, byteCount: n)
        used += n
    }

    @inlinable
    public func append(_ byte: UInt8) {
        if used == allocated { grow(toHold: used + 1) }
        base.unsafelyUnwrapped.storeBytes(of: byte, toByteOffset: used, as: UInt8.self)
        used += 1
    }

    @inlinable
    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    @inlinable
    public func append(_ other: ByteBuffer) {
        other.withUnsafeBytes { append($0) }
    }

    /// A literal known when the program is built (`" HTTP/1.1\r\n"`).
    @inlinable
    public func append(_ literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// A String's UTF-8 bytes, through its contiguous storage (iterating `utf8` costs several times more).
    @inlinable
    public func append(utf8 string: String) {
        var string = string
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// `\r\n`
    @inlinable
    public func appendCRLF() {
        if allocated - used < 2 { grow(toHold: used + 2) }
        base.unsafelyUnwrapped.storeBytes(of: 0x0A0D as UInt16, toByteOffset: used, as: UInt16.self)
        used += 2
    }

    /// Doubles the memory (at least 256 bytes) until `minimum` bytes fit; the bytes stay.
    @usableFromInline
    func grow(toHold minimum: Int) {
        var size = max(allocated * 2, 256)
        while size < minimum { size *= 2 }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        if let base {
            grown.copyMemory(from: base, byteCount: used)
            base.deallocate()
        }
        base = grown
        allocated = size
    }

    // MARK: reading and removing

    /// The bytes, valid only inside `body` (any mutation may move them).
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: used))
    }

    /// Bytes `from..<count`, valid only inside `body`.
    @inlinable
    public func withUnsafeBytes<R>(from start: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(start >= 0 && start <= used, "ByteBuffer: start out of range")
        return try body(UnsafeRawBufferPointer(start: base.map { $0 + start }, count: used - start))
    }

    /// Bytes `from..<count`, writable in place, valid only inside `body` (a response head scrubbed
    /// where it was written, docs/ARCHITECTURE.md "Scrubbing").
    public func withUnsafeMutableBytes<R>(from start: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        precondition(start >= 0 && start <= used, "ByteBuffer: start out of range")
        return try body(UnsafeMutableRawBufferPointer(start: base.map { $0 + start }, count: used - start))
    }

    /// Forgets the bytes; `keepingCapacity: false` gives the memory back too (a buffer that grew large).
    @inlinable
    public func removeAll(keepingCapacity: Bool = true) {
        used = 0
        if !keepingCapacity { releaseMemory() }
    }

    @usableFromInline
    func releaseMemory() {
        base?.deallocate()
        base = nil
        allocated = 0
    }

    /// Drops the first `n` bytes, moving the rest to the front.
    public func removeFirst(_ n: Int) {
        precondition(n >= 0 && n <= used, "ByteBuffer: removeFirst out of range")
        guard n > 0, let base else { return }
        (base).copyMemory(from: base + n, byteCount: used - n)
        used -= n
    }

    /// Keeps the first `length` bytes.
    public func truncate(to length: Int) {
        precondition(length >= 0 && length <= used, "ByteBuffer: truncate out of range")
        used = length
    }

    /// A copy of bytes `from..<count`.
    public func copyBytes(from start: Int) -> [UInt8] {
        withUnsafeBytes(from: start) { Array($0) }
    }
}
