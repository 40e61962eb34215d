"""gunicorn's access log, with the route each request matched instead of its path and query string
(which carry user and session ids). `make run` serves with it: `--logger-class apps.core.access_log.AccessLogger`."""

from gunicorn.glogging import Logger


class AccessLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        from apps.core.logs import path_route

        atoms = super().atoms(resp, req, environ, request_time)
        route = path_route(environ.get("PATH_INFO", ""))
        atoms.update(U=route, q="", f="-", r=f"{environ['REQUEST_METHOD']} {route} {environ['SERVER_PROTOCOL']}")
        return atoms
