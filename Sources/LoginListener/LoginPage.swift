/// The HTML pages the listener answers with. Everything taken from the request is escaped.
enum LoginPage {
    static func html(title: String, message: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title></head>
        <body><h1>\(escape(title))</h1><p>\(escape(message))</p></body></html>

        """
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A whole HTTP/1.1 response, closing the connection. No caching, no Referer to the next page
    /// (the address holds the code), a CSP that allows nothing to load or run.
    static func response(status: Int, reason: String, title: String, message: String, extraHeaders: [String] = []) -> [UInt8] {
        let body = html(title: title, message: message)
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        head += "Content-Type: text/html; charset=utf-8\r\n"
        head += "Content-Length: \(body.utf8.count)\r\n"
        head += "Cache-Control: no-store\r\n"
        head += "Referrer-Policy: no-referrer\r\n"
        head += "Content-Security-Policy: default-src 'none'\r\n"
        head += "X-Content-Type-Options: nosniff\r\n"
        for header in extraHeaders { head += header + "\r\n" }
        head += "Connection: close\r\n\r\n"
        return Array((head + body).utf8)
    }
}
