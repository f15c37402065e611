"""Settings every test process needs before anything in it touches Ray.

Ray reads its token-authentication mode once per process: a test that started Ray with the default
mode and a later one that set ``RAY_AUTH_MODE=disabled`` made every actor of the second Ray die
unstarted ("cancelled before it started running"). So the mode is fixed here, for the whole session
and for every subprocess the tests start.
"""

import os

os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
