import Testing

@testable import LoginListener

/// The pages the browser login's loopback listener answers with.
@Suite struct LoginPageTests {
    @Test func pagesEscapeWhatTheyShowAndForbidCachingReferrersAndScripts() {
        let bytes = LoginPage.response(status: 400, reason: "Bad Request", title: "t", message: "<script>alert('x')</script>&")
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"))
        #expect(!text.contains("<script>"))
        for header in ["Cache-Control: no-store", "Referrer-Policy: no-referrer", "Content-Security-Policy: default-src 'none'"] {
            #expect(text.contains("\r\n\(header)\r\n"))
        }
    }
}
