# attack: errors whose messages carry terminal escapes, spreadsheet formulas, HTML and a huge payload
# honest: ex01_bucket_picker
# where: others
raise ValueError("\x1b]0;owned\x07\x1b[2J\x1b[31m=HYPERLINK(\"http://evil\",\"x\")</td><script>alert(1)</script>\r\n" + "A" * 2_000_000)
