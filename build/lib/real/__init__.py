"""robosteer's real-robot layer: the Robot interface, drivers (sim twin, UR, ROS 2), the websocket policy
server and client, the safety filter and the control-loop runtime. See docs/deploy.md.

Nothing here is imported eagerly: ``real.drivers.make_robot`` loads a driver (and its optional SDK) only
when asked for it, and ``real -> policies`` is the only dependency on the rest of robosteer besides the sim
twin's use of ``sim``.
"""
