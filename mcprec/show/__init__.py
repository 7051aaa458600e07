"""What mcprec shows of a cassette on the command line: the session list and a session's
timeline (``timeline``), a session's tools, and the JSON Lines export and import (``dump``)."""
