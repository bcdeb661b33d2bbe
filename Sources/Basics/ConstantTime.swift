/// Whether `a` and `b` are the same bytes, in time that depends only on their lengths: comparing a
/// secret (`require_value`, a login's `state`) stops at no first difference, so the time taken
/// reveals nothing of the right value.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
    for i in 0..<max(a.count, b.count) {
        let x = i < a.count ? a[i] : 0
        let y = i < b.count ? b[i] : 0
        difference |= x ^ y
    }
    return difference == 0 && a.count == b.count
}

/// The same for any two runs of bytes (a placeholder read in place from a request, as a slice).
public func constantTimeEquals<A: RandomAccessCollection<UInt8>, B: RandomAccessCollection<UInt8>>(_ a: A, _ b: B) -> Bool {
    var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
    var i = a.startIndex
    var j = b.startIndex
    for _ in 0..<max(a.count, b.count) {
        let x = i < a.endIndex ? a[i] : 0
        let y = j < b.endIndex ? b[j] : 0
        difference |= x ^ y
        if i < a.endIndex { i = a.index(after: i) }
        if j < b.endIndex { j = b.index(after: j) }
    }
    return difference == 0 && a.count == b.count
}
