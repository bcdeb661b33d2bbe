import Testing

@testable import HTTP1

@Suite struct ByteBufferTests {
    @Test func aNewBufferHoldsNoMemory() {
        let buffer = ByteBuffer()
        #expect(buffer.isEmpty && buffer.count == 0 && buffer.capacity == 0)
        #expect(buffer.bytes == [])
        buffer.withUnsafeBytes { #expect($0.count == 0) }
    }

    @Test func appendsOfEveryKindKeepTheirOrderAcrossGrowth() {
        let buffer = ByteBuffer()
        var expected: [UInt8] = []
        // Past the first 256 bytes and several doublings, with every kind of append.
        for round in 0..<200 {
            buffer.append(UInt8(truncatingIfNeeded: round))
            expected.append(UInt8(truncatingIfNeeded: round))
            buffer.append("ab")
            expected += Array("ab".utf8)
            buffer.append(utf8: "café \(round)")
            expected += Array("café \(round)".utf8)
            buffer.appendCRLF()
            expected += [13, 10]
            let piece = [UInt8](repeating: UInt8(round % 251), count: round % 37)
            buffer.append(piece)
            expected += piece
            piece.withUnsafeBytes { buffer.append($0) }
            expected += piece
        }
        #expect(buffer.count == expected.count)
        #expect(buffer.bytes == expected)
        #expect(buffer.capacity >= buffer.count)
    }

    @Test func aLongStringIsAppendedWhole() {
        let buffer = ByteBuffer()
        let long = String(repeating: "x€", count: 1000)
        buffer.append(utf8: long)
        #expect(buffer.bytes == Array(long.utf8))
    }

    @Test func bytesAreReadFromAnOffset() {
        let buffer = ByteBuffer(Array("hello world".utf8))
        #expect(buffer.withUnsafeBytes(from: 6) { Array($0) } == Array("world".utf8))
        #expect(buffer.withUnsafeBytes(from: 11) { $0.count } == 0)
        #expect(buffer.copyBytes(from: 4) == Array("o world".utf8))
    }

    @Test func removingKeepsWhatIsLeft() {
        let buffer = ByteBuffer(Array(0..<100))
        buffer.removeFirst(30)
        #expect(buffer.bytes == Array(30..<100))
        buffer.truncate(to: 10)
        #expect(buffer.bytes == Array(30..<40))
        buffer.removeFirst(10)
        #expect(buffer.isEmpty)
        buffer.append([1, 2, 3])
        #expect(buffer.bytes == [1, 2, 3])
    }

    @Test func removeAllKeepsOrGivesBackTheMemory() {
        let buffer = ByteBuffer(Array(repeating: 7, count: 1000))
        let grown = buffer.capacity
        buffer.removeAll()
        #expect(buffer.isEmpty && buffer.capacity == grown)
        buffer.append(9)
        buffer.removeAll(keepingCapacity: false)
        #expect(buffer.isEmpty && buffer.capacity == 0)
        buffer.append(Array(repeating: 8, count: 300))
        #expect(buffer.bytes == Array(repeating: 8, count: 300))
    }

    @Test func oneBufferAppendsAnother() {
        let a = ByteBuffer(Array("head|".utf8))
        let b = ByteBuffer(Array("body".utf8))
        a.append(b)
        #expect(a.bytes == Array("head|body".utf8))
        a.append(ByteBuffer())
        #expect(a.bytes == Array("head|body".utf8))
    }
}
