"""ROS 2 launch file: run robosteer-deploy with the ROS 2 bridge driver against a ros2_control arm.

    ros2 launch real/ros2/robosteer_bridge.launch.py policy:=ws://127.0.0.1:8000 episodes:=5 \
        joint_state_topic:=/joint_states command_topic:=/forward_position_controller/commands

The bridge is a plain rclpy node created inside robosteer-deploy (real/drivers/ros2.py), so this file only
wires launch arguments to Hydra overrides. Start the arm's driver and a forward position controller first,
and the policy server (robosteer-serve) on the GPU host or locally.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration


def generate_launch_description() -> LaunchDescription:
    args = {
        "policy": "ws://127.0.0.1:8000",
        "task": "push-v3",
        "episodes": "1",
        "mode": "async",
        "out": "runs/deploy_ros2",
        "joint_state_topic": "/joint_states",
        "command_topic": "/forward_position_controller/commands",
        "rate_hz": "30",
    }
    declared = [DeclareLaunchArgument(name, default_value=value) for name, value in args.items()]
    cmd = [
        "robosteer-deploy",
        "robot=ros2",
        ["policy=", LaunchConfiguration("policy")],
        ["task=", LaunchConfiguration("task")],
        ["episodes=", LaunchConfiguration("episodes")],
        ["mode=", LaunchConfiguration("mode")],
        ["out=", LaunchConfiguration("out")],
        ["robot.driver.joint_state_topic=", LaunchConfiguration("joint_state_topic")],
        ["robot.driver.command_topic=", LaunchConfiguration("command_topic")],
        ["robot.driver.rate_hz=", LaunchConfiguration("rate_hz")],
    ]
    return LaunchDescription([*declared, ExecuteProcess(cmd=cmd, output="screen")])
