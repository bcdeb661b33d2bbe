/// Whether `a` and `b` are the same bytes, in time that depends only on their lengths: comparing a
/// secret (`require_value`, a login's `state`) stops at no first difference, so the time taken
/// reveals nothing of the right value.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.withUnsafeBytes { a in b.withUnsafeBytes { constantTimeEquals(a, $0) } }
}

/// The same for two runs of bytes in memory (a placeholder read in place from a request). Not
/// generic: a generic compare called from another module is not specialized, and walks its bytes
/// through the collection's witnesses, tens of instructions each.
public func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
    let common = min(a.count, b.count)
    // No branch in the loop: the compiler compares many bytes at once.
    for i in 0..<common { difference |= a[i] ^ b[i] }
    // The longer one's other bytes against zeros: the time still depends on the lengths only.
    let longer = a.count > b.count ? a : b
    for i in common..<longer.count { difference |= longer[i] }
    return difference == 0 && a.count == b.count
}
